#!/bin/bash
# trainstack boot (user data): what a node needs before its programs, run at every boot.
# --programs (trainstack-programs.service): the OSS SDK, then the node programs from the stack
# bucket, every file checked against its sha256. --failed (trainstack-setup-failed.service): the
# stop-billing policy when that or the setup failed.
