
# --- NVIDIA driver and CUDA -------------------------------------------------------------
# With AUTO_INSTALL_DRIVER=1 this runs Alibaba's documented auto-install script (the one
# the console's "Auto-install GPU driver" puts in user data): 10-20 minutes, GPUs unusable
# meanwhile, log /root/auto_install/auto_install.log ending in "ALL INSTALL OK", and a
# reboot, after which this service runs again and only verifies.
AUTO_INSTALL_LOG=/root/auto_install/auto_install.log

gpus_visible() { nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true; }

run_auto_install() {
  local dir=/root/auto_install base
  base=$(agent meta meta-data/source-address | head -n 1) || die "metadata source-address unavailable"
  mkdir -p "$dir"
  curl -fsS --retry 10 -o "$dir/$AUTO_INSTALL_SCRIPT" "$base/opsx/ecs/linux/binary/script/$AUTO_INSTALL_SCRIPT" \
    || die "cannot download the GPU driver auto-install script from $base"
  log "installing NVIDIA driver $DRIVER_VERSION, CUDA $CUDA_VERSION, cuDNN $CUDNN_VERSION (10-20 min, log $AUTO_INSTALL_LOG)"
  (cd "$dir" && bash "$dir/$AUTO_INSTALL_SCRIPT" "$DRIVER_VERSION" "$CUDA_VERSION" "$CUDNN_VERSION" FALSE FALSE) \
    || log "the auto-install script exited with $?; waiting for the driver anyway"
}

setup_gpu_driver() {
  local deadline n
  if [ "$(gpus_visible)" -eq 0 ]; then
    image_lacks gpu-driver "nvidia-smi finds no GPU"
    [ "$AUTO_INSTALL_DRIVER" = 1 ] \
      || die "nvidia-smi finds no GPU and the image plan does not auto-install the driver: use an image with the NVIDIA driver"
    if [ ! -e "$STATE/driver-install-started" ]; then
      touch "$STATE/driver-install-started"
      run_auto_install
    fi
    deadline=$(($(date +%s) + DRIVER_WAIT_SECONDS))
    until [ "$(gpus_visible)" -gt 0 ]; do
      [ "$(date +%s)" -lt "$deadline" ] || die "NVIDIA driver not working ${DRIVER_WAIT_SECONDS}s after the auto-install started; $(grep -c 'ALL INSTALL OK' "$AUTO_INSTALL_LOG" 2>/dev/null || echo 0) 'ALL INSTALL OK' lines in $AUTO_INSTALL_LOG"
      sleep 15
    done
  fi
  n=$(gpus_visible)
  [ "$n" -ge "$GPUS_PER_NODE" ] || die "nvidia-smi sees $n GPU(s); the plan expects $GPUS_PER_NODE: a GPU is missing or broken"
  if [ "$AUTO_INSTALL_DRIVER" = 1 ] && [ -e "$AUTO_INSTALL_LOG" ] && ! grep -q 'ALL INSTALL OK' "$AUTO_INSTALL_LOG"; then
    log "WARNING: the driver works but $AUTO_INSTALL_LOG has no 'ALL INSTALL OK' line (CUDA or cuDNN may be missing)"
  fi
  log "NVIDIA driver OK: $n GPU(s), driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)"
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    log "CUDA toolkit: $(/usr/local/cuda/bin/nvcc --version | tail -n 1)"
  fi
}
