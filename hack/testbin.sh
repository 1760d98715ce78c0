#!/usr/bin/env bash
# Builds the control-plane binaries the tests and `make run` need (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok,
# kwokctl) from the Go module proxy, once per machine, into a cache outside
# the checkout, keyed by version. Prints the assets directory on stdout;
# progress on stderr.
#
#   hack/testbin.sh          all of the above
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

# The whole build is serialised so parallel clones or test runs on one
# machine never build the same binary twice at once.
mkdir -p "${CACHE_ROOT}"
exec 9>"${CACHE_ROOT}/.lock"
flock 9

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
    log "building helm ${version} (first run only, ~1 min)..."
    mkdir -p "${dir}"
    (cd "${here}" && go build -ldflags "-X helm.sh/helm/v3/internal/version.version=${version}" -o "${dir}/helm.tmp" helm.sh/helm/v3/cmd/helm)
    mv "${dir}/helm.tmp" "${dir}/helm"
  fi
  echo "${dir}"
}

want="${1:-all}"
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

mkdir -p "${ASSETS}"
ln -sf "${CACHE_ROOT}/etcd-${ETCD_VERSION}/etcd" "${ASSETS}/etcd"
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  [[ -x "${K8S_DIR}/${b}" ]] && ln -sf "${K8S_DIR}/${b}" "${ASSETS}/${b}"
done
for b in kwok kwokctl; do
  [[ -x "${CACHE_ROOT}/kwok-${KWOK_VERSION}/${b}" ]] && ln -sf "${CACHE_ROOT}/kwok-${KWOK_VERSION}/${b}" "${ASSETS}/${b}"
done
echo "${ASSETS}"
