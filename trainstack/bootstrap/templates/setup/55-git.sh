
# --- git (job.code_uri is a git repository) ---------------------------------------------
setup_git() {
  command -v git >/dev/null 2>&1 || pkg git git
}
