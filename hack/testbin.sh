#!/usr/bin/env bash
# Builds what the tests and `make run` need from the Go module proxy, once
# per machine, into a cache outside the checkout, keyed by version: the
# control-plane binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok, kwokctl) and the tools the tests run. Prints
# the directory asked for on stdout; progress on stderr.
#
#   hack/testbin.sh          the control plane, all of the above
#   hack/testbin.sh envtest  etcd, kube-apiserver and kubectl only
#   hack/testbin.sh node     kubelet and kube-proxy, built with version ldflags
#                            (they report v${K8S_VERSION}) into their own
#                            directory, which is printed instead
#   hack/testbin.sh helm     the helm CLI (hack/helmcli), in its own
#                            directory, which is printed instead
#   hack/testbin.sh cert-manager
#                            cert-manager's controllers and CA injector
#                            (hack/certmanager) and its CRDs (crds.yaml), in
#                            their own directory, which is printed instead
#   hack/testbin.sh test-deps
#                            everything `make test` runs, before any test
#                            starts (make test-deps): the control plane,
#                            kubelet and kube-proxy (Linux and root only, as
#                            the real-node suite), cert-manager, the helm
#                            CLI, the real-node test images' third-party
#                            binaries (internal/nodeimages) and
#                            golangci-lint; one line per item with the time
#                            it took. Prints nothing on stdout.
#
# With --check first (hack/testbin.sh --check helm), nothing is built: the
# directory is printed when everything in it is there, else the script names
# what is missing and the command that builds it, and exits 1. Tests use it:
# a build inside a test would count against the test's own timeout.
#
# There is no prebuilt download here on purpose: the machines this project is
# tested on reach only package registries.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-0.8.0}"
CACHE_ROOT="${RUKPAK_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rukpak-testbin}"
ASSETS="${CACHE_ROOT}/assets-k8s${K8S_VERSION}-stamped-etcd${ETCD_VERSION}-kwok${KWOK_VERSION}"

log() { echo ">> $*" >&2; }

CHECK=""
if [[ "${1:-}" == "--check" ]]; then
  CHECK=1
  shift
fi
want="${1:-all}"

# missing fails a --check for a binary (or file) that is not built yet.
missing() {
  local target="${want}"
  [[ "${target}" == all ]] && target=""
  echo "hack/testbin.sh: $1 is not built; build what the tests need with 'make test-deps' (or: hack/testbin.sh${target:+ ${target}})" >&2
  exit 1
}

# The whole build is serialised so parallel clones or test runs on one
# machine never build the same binary twice at once. A check only looks at
# finished files (each is moved into place whole), so it takes no lock.
mkdir -p "${CACHE_ROOT}"
if [[ -z "${CHECK}" ]]; then
  exec 9>"${CACHE_ROOT}/.lock"
  flock 9
fi

# The caller's Go settings, for the builds that must match what the tests
# and make lint compute (the test images' cache keys, golangci-lint in the
# build cache as `go tool` finds it).
caller_env=(env "GOFLAGS=${GOFLAGS:-}" "GOWORK=${GOWORK:-}" "GOTOOLCHAIN=${GOTOOLCHAIN:-}")
export CGO_ENABLED=0 GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOFLAGS="${GOFLAGS:-} -trimpath"
export GOWORK=off

# Every Kubernetes binary carries the version the release build would stamp
# into it, so it reports v${K8S_VERSION} and not v0.0.0-master (kubectl
# version and clients that parse the server version need it). The "-stamped"
# directory keeps binaries built before that apart.
K8S_DIR="${CACHE_ROOT}/k8s-${K8S_VERSION}-stamped"
build_k8s() {
  local bin="$1" minutes="$2"
  local dest="${K8S_DIR}/${bin}"
  [[ -x "${dest}" ]] && return 0
  [[ -n "${CHECK}" ]] && missing "${bin} v${K8S_VERSION}"
  log "building ${bin} v${K8S_VERSION} (first run only, ~${minutes} min)..."
  prepare_k8s_src
  k8s_version_ldflags
  mkdir -p "$(dirname "${dest}")"
  (cd "${src}" && go build -mod=mod -ldflags "${K8S_VERSION_LDFLAGS}" -o "${dest}.tmp" "k8s.io/kubernetes/cmd/${bin}")
  mv "${dest}.tmp" "${dest}"
}

K8S_VERSION_LDFLAGS=""
k8s_version_ldflags() {
  local major="${K8S_VERSION%%.*}" minor="${K8S_VERSION#*.}"
  minor="${minor%%.*}"
  local pkg flags=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${pkg}.gitVersion=v${K8S_VERSION}"
    flags+=" -X ${pkg}.gitMajor=${major}"
    flags+=" -X ${pkg}.gitMinor=${minor}"
    flags+=" -X ${pkg}.gitTreeState=clean"
    flags+=" -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
  done
  K8S_VERSION_LDFLAGS="${flags# }"
}

NODE_DIR="${CACHE_ROOT}/node-k8s${K8S_VERSION}"
build_k8s_node() {
  local bin="$1" minutes="$2"
  local dest="${NODE_DIR}/${bin}"
  [[ -x "${dest}" ]] && return 0
  [[ -n "${CHECK}" ]] && missing "${bin} v${K8S_VERSION}"
  log "building ${bin} v${K8S_VERSION} (first run only, ~${minutes} min)..."
  prepare_k8s_src
  k8s_version_ldflags
  mkdir -p "${NODE_DIR}"
  (cd "${src}" && go build -mod=mod -ldflags "${K8S_VERSION_LDFLAGS}" -o "${dest}.tmp" "k8s.io/kubernetes/cmd/${bin}")
  mv "${dest}.tmp" "${dest}"
}

# Sets src to a module that requires k8s.io/kubernetes at K8S_VERSION.
prepare_k8s_src() {
  src="${CACHE_ROOT}/src/k8s-${K8S_VERSION}"
  if [[ ! -f "${src}/go.sum.done" ]]; then
    mkdir -p "${src}"
    local kmod
    kmod="$(go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    {
      echo "module rukpak.local/k8s-binaries"
      echo
      echo "go 1.26.0"
      echo
      echo "require k8s.io/kubernetes v${K8S_VERSION}"
      echo
      echo "replace ("
      # k8s.io/kubernetes points its staging modules at ./staging; outside its
      # repository each one is the published module of the matching version.
      sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\t\1 => \1 v0.'"${K8S_VERSION#1.}"'#p' "${kmod}"
      echo ")"
    } >"${src}/go.mod"
    echo 'package tools' >"${src}/tools.go"
    touch "${src}/go.sum.done"
  fi
}

build_etcd() {
  local dest="${CACHE_ROOT}/etcd-${ETCD_VERSION}/etcd"
  [[ -x "${dest}" ]] && return 0
  [[ -n "${CHECK}" ]] && missing "etcd v${ETCD_VERSION}"
  log "building etcd v${ETCD_VERSION} (first run only, ~1 min)..."
  # etcd's server module carries replace directives, so `go install pkg@v`
  # refuses it; a one-line module that requires it builds the same main.
  local src="${CACHE_ROOT}/src/etcd-${ETCD_VERSION}"
  mkdir -p "${src}" "$(dirname "${dest}")"
  printf 'module rukpak.local/etcd\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "${ETCD_VERSION}" >"${src}/go.mod"
  (cd "${src}" && go build -mod=mod -o "${dest}.tmp" go.etcd.io/etcd/server/v3)
  mv "${dest}.tmp" "${dest}"
  [[ -x "${dest}" ]]
}

build_kwok() {
  local dir="${CACHE_ROOT}/kwok-${KWOK_VERSION}"
  [[ -x "${dir}/kwok" && -x "${dir}/kwokctl" ]] && return 0
  [[ -n "${CHECK}" ]] && missing "kwok v${KWOK_VERSION}"
  log "building kwok and kwokctl v${KWOK_VERSION} (first run only, ~4 min)..."
  mkdir -p "${dir}"
  GOBIN="${dir}" go install "sigs.k8s.io/kwok/cmd/kwok@v${KWOK_VERSION}" "sigs.k8s.io/kwok/cmd/kwokctl@v${KWOK_VERSION}"
}

# cert-manager's command modules are not on the module proxy: hack/certmanager
# is a module of ours that wires its published controllers into one binary.
# The directory is keyed by the wiring's source too, so a change rebuilds it.
build_cert_manager() {
  local here version key
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/certmanager"
  version="$(cd "${here}" && go list -m -f '{{.Version}}' github.com/cert-manager/cert-manager)"
  key="$(cat "${here}/main.go" "${here}/go.mod" "${here}/go.sum" | sha256sum | cut -c1-12)"
  local dir="${CACHE_ROOT}/cert-manager-${version}-${key}"
  if [[ ! -x "${dir}/cert-manager" || ! -f "${dir}/crds.yaml" ]]; then
    [[ -n "${CHECK}" ]] && missing "cert-manager ${version}"
    log "building cert-manager ${version} (first run only, ~3 min)..."
    mkdir -p "${dir}"
    (cd "${here}" && go build -o "${dir}/cert-manager.tmp" .)
    local mod f
    mod="$(cd "${here}" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)"
    for f in "${mod}"/deploy/crds/*.yaml; do
      cat "${f}"
      echo "---"
    done >"${dir}/crds.yaml"
    mv "${dir}/cert-manager.tmp" "${dir}/cert-manager"
  fi
  echo "${dir}"
}

# The helm CLI of the helm.sh/helm/v3 version hack/helmcli pins (the
# project's own); its own module, as the CLI needs go.sum entries the
# project does not.
build_helm() {
  local here version
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/helmcli"
  version="$(cd "${here}" && go list -m -f '{{.Version}}' helm.sh/helm/v3)"
  local dir="${CACHE_ROOT}/helm-${version}"
  if [[ ! -x "${dir}/helm" ]]; then
    [[ -n "${CHECK}" ]] && missing "helm ${version}"
    log "building helm ${version} (first run only, ~1 min)..."
    mkdir -p "${dir}"
    (cd "${here}" && go build -ldflags "-X helm.sh/helm/v3/internal/version.version=${version}" -o "${dir}/helm.tmp" helm.sh/helm/v3/cmd/helm)
    mv "${dir}/helm.tmp" "${dir}/helm"
  fi
  echo "${dir}"
}

# The real-node test images' binaries, into internal/nodeimages' own cache,
# where the tests find them: the third-party programs (kube-state-metrics,
# prometheus-operator's admission webhook), which tests never build, and
# ours (test/images), which tests relink only when an input changed.
build_node_image_binaries() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  (cd "${root}" && "${caller_env[@]}" go run ./test/images/build --binaries-only)
}

# golangci-lint as make lint runs it (go tool, hack/tools/go.mod), with the
# caller's flags, so that make lint finds it in the build cache.
build_golangci_lint() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  (cd "${root}" && "${caller_env[@]}" go tool -modfile=hack/tools/go.mod golangci-lint version >/dev/null)
}

# step runs one item of test-deps and prints the time it took.
step() {
  local what="$1" start
  shift
  start="$(date +%s)"
  log "${what}..."
  "$@" >/dev/null
  log "${what}: done in $(($(date +%s) - start)) s"
}

# link_assets points the assets directory at what is built of the control
# plane.
link_assets() {
  mkdir -p "${ASSETS}"
  ln -sf "${CACHE_ROOT}/etcd-${ETCD_VERSION}/etcd" "${ASSETS}/etcd"
  local b
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    if [[ -x "${K8S_DIR}/${b}" ]]; then ln -sf "${K8S_DIR}/${b}" "${ASSETS}/${b}"; fi
  done
  for b in kwok kwokctl; do
    if [[ -x "${CACHE_ROOT}/kwok-${KWOK_VERSION}/${b}" ]]; then ln -sf "${CACHE_ROOT}/kwok-${KWOK_VERSION}/${b}" "${ASSETS}/${b}"; fi
  done
}

control_plane() {
  build_etcd
  build_k8s kube-apiserver 7
  build_k8s kubectl 2
  build_k8s kube-controller-manager 2
  build_k8s kube-scheduler 1
  build_kwok
  link_assets
}

node_binaries() {
  build_k8s_node kubelet 5
  build_k8s_node kube-proxy 4
}

if [[ "${want}" == "test-deps" ]]; then
  [[ -n "${CHECK}" ]] && { echo "hack/testbin.sh: --check test-deps: check each item instead" >&2; exit 2; }
  total="$(date +%s)"
  step "control plane (etcd, kube-apiserver, kubectl, kube-controller-manager, kube-scheduler, kwok)" control_plane
  if [[ "$(uname -s)" == Linux && "$(id -u)" == 0 ]]; then
    step "kubelet and kube-proxy (real-node suite)" node_binaries
  else
    log "kubelet and kube-proxy: skipped (the real-node suite runs on Linux as root only)"
  fi
  step "cert-manager" build_cert_manager
  step "helm CLI" build_helm
  step "test images' binaries (kube-state-metrics, admission-webhook, test/images)" build_node_image_binaries
  step "golangci-lint" build_golangci_lint
  log "everything the tests need is built: $(($(date +%s) - total)) s"
  exit 0
fi
if [[ "${want}" == "helm" ]]; then
  build_helm
  exit 0
fi
if [[ "${want}" == "cert-manager" ]]; then
  build_cert_manager
  exit 0
fi
if [[ "${want}" == "node" ]]; then
  build_k8s_node kubelet 5
  build_k8s_node kube-proxy 4
  echo "${NODE_DIR}"
  exit 0
fi
build_etcd
build_k8s kube-apiserver 7
# The tests' kubectl: the version of the control plane, whatever is on PATH.
build_k8s kubectl 2
if [[ "${want}" == "all" ]]; then
  build_k8s kube-controller-manager 2
  build_k8s kube-scheduler 1
  build_kwok
fi

link_assets
echo "${ASSETS}"
