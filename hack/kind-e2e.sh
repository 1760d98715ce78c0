#!/usr/bin/env bash
# Runs the end-to-end suite (test/e2e) against rukpak installed in a kind
# cluster from the image built by `make image`. See docs/kind.md.
#
#   make kind-e2e                      # or: hack/kind-e2e.sh
#
# Environment:
#   KIND_CLUSTER_NAME  cluster name (default rukpak-e2e); an existing cluster
#                      of that name is reused
#   IMG                image name loaded into the cluster (default rukpak:devel)
#   KIND_E2E_KEEP      1 keeps the cluster afterwards (default: delete it
#                      when this script created it)
#   KIND_E2E_SKIP_TESTS 1 stops after installing rukpak (for poking around)
#   E2E_FIXTURE_HOST   address the cluster uses to reach the suite's registry
#                      and git server, which listen there (default: the kind
#                      network's gateway); see docs/kind.md
#   GO_TEST_FLAGS      extra flags for go test (default -count=1 -v -timeout 30m)
#   KIND, KUBECTL, DOCKER, GO   the tools (default: from PATH)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

CLUSTER=${KIND_CLUSTER_NAME:-rukpak-e2e}
IMG=${IMG:-rukpak:devel}
KIND=${KIND:-kind}
KUBECTL=${KUBECTL:-kubectl}
DOCKER=${DOCKER:-docker}
GO=${GO:-go}
NS=rukpak-system
# The content server's node port (manifests/overlays/kind) and its host port.
CONTENT_PORT=30443
STATE="$ROOT/bin/kind-e2e"
KUBECONFIG_FILE="$STATE/kubeconfig"

log() { printf '>> %s\n' "$*"; }
die() { printf 'kind-e2e: %s\n' "$*" >&2; exit 1; }

# --- fail fast on missing tools -------------------------------------------
for tool in "$DOCKER" "$KIND" "$KUBECTL" "$GO" base64; do
  command -v "$tool" >/dev/null 2>&1 || case "$tool" in
    "$DOCKER") die "'$DOCKER' not found: kind runs its nodes as Docker containers; install Docker (or Podman with KIND_EXPERIMENTAL_PROVIDER=podman and DOCKER=podman). Without a container engine use 'make test-e2e' (local control plane)." ;;
    "$KIND") die "'$KIND' not found: install kind (https://kind.sigs.k8s.io/docs/user/quick-start/#installation), e.g. 'go install sigs.k8s.io/kind@latest'." ;;
    *) die "'$tool' not found in PATH." ;;
  esac
done
"$DOCKER" info >/dev/null 2>&1 || die "'$DOCKER' is installed but no container engine answers ('$DOCKER info' fails): start the Docker daemon. Without one use 'make test-e2e'."

mkdir -p "$STATE"

# --- cluster ----------------------------------------------------------------
created=0
if "$KIND" get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  log "reusing kind cluster $CLUSTER"
else
  log "creating kind cluster $CLUSTER"
  "$KIND" create cluster --name "$CLUSTER" --wait 120s --config - <<YAML
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
  # The suite downloads status.contentURL (https://localhost:$CONTENT_PORT)
  # from the host.
  extraPortMappings:
  - containerPort: $CONTENT_PORT
    hostPort: $CONTENT_PORT
    listenAddress: 127.0.0.1
    protocol: TCP
YAML
  created=1
fi
cleanup() {
  local code=$?
  if [[ $code -ne 0 ]]; then
    log "failed; rukpak state in the cluster:"
    "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" -n "$NS" get pods,deploy -o wide 2>/dev/null || true
    for d in rukpak-core rukpak-webhook; do
      echo "---- last log lines of deployment/$d ----"
      "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" -n "$NS" logs "deployment/$d" --tail=40 2>/dev/null || true
    done
  fi
  if [[ $created -eq 1 && "${KIND_E2E_KEEP:-0}" != 1 ]]; then
    log "deleting kind cluster $CLUSTER (KIND_E2E_KEEP=1 keeps it)"
    "$KIND" delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  fi
  exit $code
}
trap cleanup EXIT
"$KIND" get kubeconfig --name "$CLUSTER" >"$KUBECONFIG_FILE"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# --- image ------------------------------------------------------------------
log "building $IMG (make image)"
make --no-print-directory image IMG="$IMG"
log "loading bin/rukpak-image.tar into $CLUSTER"
"$KIND" load image-archive bin/rukpak-image.tar --name "$CLUSTER"

# --- test images (workloads of the suite's bundles run as real pods) -------
log "building the test images (go run ./test/images/build) and loading them"
"$GO" run ./test/images/build --out "$STATE/images" >/dev/null
for tarball in "$STATE"/images/*.tar; do
  "$KIND" load image-archive "$tarball" --name "$CLUSTER"
done

# --- install ------------------------------------------------------------------
log "installing manifests/overlays/kind (manifests/base + the content node port)"
# The manifests name rukpak:devel; another IMG is substituted here.
k kustomize manifests/overlays/kind | sed "s|image: rukpak:devel\$|image: $IMG|" \
  | k apply --server-side --force-conflicts -f -
k wait --for=condition=Established --timeout=60s crd/bundles.core.rukpak.io crd/bundledeployments.core.rukpak.io
log "waiting for the Deployments"
# The webhook turns ready only once its certificate is injected into the
# webhook configuration, so a ready webhook admits requests.
k -n "$NS" rollout status deployment/rukpak-core --timeout=180s
k -n "$NS" rollout status deployment/rukpak-webhook --timeout=180s
for _ in $(seq 60); do
  ready=$(k -n "$NS" get endpointslices -l kubernetes.io/service-name=rukpak-webhook-service \
    -o jsonpath='{.items[*].endpoints[?(@.conditions.ready==true)].addresses[0]}')
  [[ -n "$ready" ]] && break
  sleep 1
done
[[ -n "$ready" ]] || die "the webhook Service has no ready endpoint"
# The content server's self-managed CA (manifests/base), trusted by the suite.
k -n "$NS" get secret rukpak-core-tls -o jsonpath='{.data.ca\.crt}' | base64 -d >"$STATE/content-ca.crt"

if [[ "${KIND_E2E_SKIP_TESTS:-0}" == 1 ]]; then
  log "rukpak is installed; KUBECONFIG=$KUBECONFIG_FILE (KIND_E2E_SKIP_TESTS=1: not running the suite)"
  exit 0
fi

# The tools the suite runs (the helm CLI, cert-manager, kubectl of the
# control plane's version): built before it starts, never inside a test.
log "building the tools the suite runs (hack/testbin.sh)"
hack/testbin.sh envtest >/dev/null
hack/testbin.sh helm >/dev/null
hack/testbin.sh cert-manager >/dev/null

# --- the suite ------------------------------------------------------------------
# The suite's registry and git server run in the test process on the host.
# Pods reach the host through the kind network's gateway; the suite listens
# there and names its fixtures by it (E2E_FIXTURE_HOST, docs/kind.md).
if [[ -z "${E2E_FIXTURE_HOST:-}" ]]; then
  E2E_FIXTURE_HOST=$("$DOCKER" network inspect kind \
    -f '{{range .IPAM.Config}}{{if .Gateway}}{{.Gateway}} {{end}}{{end}}' 2>/dev/null | tr ' ' '\n' | grep -m1 -E '^[0-9.]+$' || true)
fi
export E2E_FIXTURE_HOST
if [[ -z "$E2E_FIXTURE_HOST" ]]; then
  log "warning: no gateway found for Docker network kind; the suite's fixtures stay on 127.0.0.1 and pods cannot reach them (set E2E_FIXTURE_HOST)"
fi
log "E2E_FIXTURE_HOST=${E2E_FIXTURE_HOST:-<unset>}"
log "running the end-to-end suite against $CLUSTER"
read -r -a flags <<<"${GO_TEST_FLAGS:--count=1 -v -timeout 30m}"
E2E_KUBECONFIG="$KUBECONFIG_FILE" E2E_CONTENT_CA="$STATE/content-ca.crt" E2E_REAL_PODS=1 \
  "$GO" test ./test/e2e/ "${flags[@]}"
