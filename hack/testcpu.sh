#!/usr/bin/env bash
# Measures what tests cost in CPU, not in wall time (which follows whatever
# else the machine runs): the CPU seconds (user+sys, from rusage) of each
# test binary with its children (the envtest API servers and etcds, kubectl,
# helm, the test registries' and git servers' processes), and how many API
# servers each started.
#
#   hack/testcpu.sh [go test flags and packages]
#       e.g. hack/testcpu.sh -p 2 -parallel 4 ./provisioner/...
#       runs go test with this script as -exec and prints one line per
#       test binary, the most expensive first:
#       package  cpu_s  user_s  sys_s  wall_s  apiservers  exit
#   hack/testcpu.sh -run '^TestX$' ./provisioner   one test (or group)
#
# API servers are counted by a directory of links to the control plane
# (KUBEBUILDER_ASSETS) whose kube-apiserver notes how it was run: --help
# (testenv copies the help once per binary) is not a start.
set -euo pipefail

if [ "${1:-}" = --exec ]; then
	shift
	bin="$1"
	shift
	name="$(pwd)"
	name="${name#"$TESTCPU_ROOT"/}"
	count="$(mktemp "$TESTCPU_DIR/count.XXXXXX")"
	times="$(mktemp "$TESTCPU_DIR/time.XXXXXX")"
	rc=0
	TESTCPU_COUNT="$count" /usr/bin/time -f "%U %S %e" -o "$times" "$bin" "$@" || rc=$?
	read -r u s e < <(tail -1 "$times")
	printf '%s\t%.1f\t%s\t%s\t%s\t%s\t%s\n' "$name" "$(echo "$u + $s" | bc)" "$u" "$s" "$e" "$(grep -vcx -e --help "$count" || true)" "$rc" >>"$TESTCPU_DIR/log"
	exit "$rc"
fi

root="$(cd "$(dirname "$0")/.." && pwd)"
command -v /usr/bin/time >/dev/null && command -v bc >/dev/null || {
	echo "hack/testcpu.sh needs /usr/bin/time (GNU time) and bc" >&2
	exit 1
}
assets="$(KUBEBUILDER_ASSETS= "$root/hack/testbin.sh" --check envtest | tail -1)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/assets"
for f in "$assets"/*; do ln -s "$f" "$dir/assets/"; done
rm "$dir/assets/kube-apiserver"
cat >"$dir/assets/kube-apiserver" <<EOF
#!/bin/sh
[ -n "\$TESTCPU_COUNT" ] && echo "\$1" >>"\$TESTCPU_COUNT"
exec '$assets/kube-apiserver' "\$@"
EOF
chmod +x "$dir/assets/kube-apiserver"
: >"$dir/log"
rc=0
TESTCPU_ROOT="$root" TESTCPU_DIR="$dir" KUBEBUILDER_ASSETS="$dir/assets" CGO_ENABLED="${CGO_ENABLED:-0}" \
	go test -count=1 -ldflags='-s -w' -exec "$root/hack/testcpu.sh --exec" "$@" >&2 || rc=$?
printf 'package\tcpu_s\tuser_s\tsys_s\twall_s\tapiservers\texit\n'
sort -t$'\t' -k2 -rn "$dir/log"
awk -F'\t' '{c += $2; n += $6} END {printf "total\t%.1f\t\t\t\t%d\n", c, n}' "$dir/log"
exit "$rc"
