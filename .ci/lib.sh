# Helpers the CI scripts source.

# Installs a Debian package; a fresh machine may have no package lists yet, so the first
# failure refreshes them once and tries again.
apt_install() {
  command -v apt-get >/dev/null 2>&1 || return 1
  apt-get install -y "$1" >/dev/null 2>&1 ||
    { apt-get update >/dev/null 2>&1 && apt-get install -y "$1" >/dev/null 2>&1; }
}

# Makes sure nginx is here (installing nginx-light), or says SKIPPED and exits 0.
need_nginx() {
  if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    apt_install nginx-light || { echo "SKIPPED: nginx is not installed and could not be installed here"; exit 0; }
    pkill -x nginx 2>/dev/null || true # the package may start the system's own
  fi
}

# Makes sure each named tool is here (installing the package of the same name), or says
# SKIPPED and exits 0.
need_tools() {
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      apt_install "$tool" || { echo "SKIPPED: $tool is not installed and could not be installed here"; exit 0; }
    fi
  done
}

# The debug binary `cargo test` built, in the target dir cargo uses here (CARGO_TARGET_DIR
# or a config may move it from ./target).
debug_binary() {
  local dir
  dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
  echo "${dir:-target}/debug/pixgw"
}
