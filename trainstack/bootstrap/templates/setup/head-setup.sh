#!/bin/bash
# trainstack node setup (a node program), run by trainstack-setup.service at every boot before the
# job: the steps node.env names (SETUP_STEPS). Every step checks before it changes anything, so a
# reboot (the GPU driver installer reboots the node) resumes where it stopped. A failed step stops
# here with a FATAL line; trainstack-setup-failed.service then applies the stop-billing policy.
