#!/usr/bin/env bash
# Makes sure the container runtime a real-node test cluster needs is on this
# machine: containerd, runc, the CNI plugins (bridge, host-local, portmap,
# loopback), iptables and conntrack, all from Debian packages. When something
# is missing it installs it with apt-get if we are root and apt-get exists;
# otherwise it names what is missing and exits 1. Prints nothing on stdout.
#
# Usage: hack/node-deps.sh [--check]   (--check never installs)
set -euo pipefail

CNI_DIRS=(/usr/lib/cni /opt/cni/bin)
log() { echo ">> $*" >&2; }

have_cni() {
  local p="$1" d
  for d in "${CNI_DIRS[@]}"; do [[ -x "${d}/${p}" ]] && return 0; done
  return 1
}

missing_pkgs() {
  local pkgs=()
  command -v containerd >/dev/null || pkgs+=(containerd)
  command -v ctr >/dev/null || [[ " ${pkgs[*]} " == *" containerd "* ]] || pkgs+=(containerd)
  command -v runc >/dev/null || pkgs+=(runc)
  local p
  for p in bridge host-local portmap loopback; do
    if ! have_cni "${p}"; then pkgs+=(containernetworking-plugins); break; fi
  done
  command -v iptables >/dev/null || command -v iptables-legacy >/dev/null || pkgs+=(iptables)
  command -v iptables-save >/dev/null || [[ " ${pkgs[*]} " == *" iptables "* ]] || pkgs+=(iptables)
  command -v conntrack >/dev/null || pkgs+=(conntrack)
  command -v ip >/dev/null || pkgs+=(iproute2)
  echo "${pkgs[*]:-}"
}

# iptables lives in /usr/sbin, which a non-login root shell may lack.
export PATH="${PATH}:/usr/sbin:/sbin"

missing="$(missing_pkgs)"
if [[ -z "${missing}" ]]; then
  exit 0
fi
if [[ "${1:-}" == "--check" ]]; then
  echo "node-deps: missing Debian packages: ${missing}" >&2
  exit 1
fi
if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
  echo "node-deps: missing Debian packages: ${missing}" >&2
  echo "node-deps: install them as root (apt-get install -y ${missing}); this script installs them itself only when run as root on a machine with apt-get" >&2
  exit 1
fi
log "installing ${missing} with apt-get (~15 s)..."
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # word splitting of the package list is intended
if ! apt-get install -y --no-install-recommends ${missing} >&2; then
  log "apt-get install failed; refreshing the package index and retrying"
  apt-get update >&2
  # shellcheck disable=SC2086
  apt-get install -y --no-install-recommends ${missing} >&2
fi
# Debian starts containerd as a system service on install; the test cluster
# runs its own containerd with its own socket and state, so the system one is
# left as the package configured it.
missing="$(missing_pkgs)"
if [[ -n "${missing}" ]]; then
  echo "node-deps: still missing after apt-get: ${missing}" >&2
  exit 1
fi
