// Package bench holds the end-to-end benchmark harness of `make bench`
// (see docs/benchmarks.md). Everything lives in bench_test.go and runs only
// when RUKPAK_BENCH=1 is set: a plain `go test ./...` (and `make test`)
// skips it at once.
package bench
