// Command build writes the real-node test images (internal/nodeimages) as
// docker-archive tarballs, offline and without Docker:
//
//	go run ./test/images/build --out bin/node-images            # all
//	go run ./test/images/build --out bin/node-images pause ready
//	go run ./test/images/build --binaries-only                  # cache only
//
// Every binary is kept in internal/nodeimages' cache: the third-party
// programs (kube-state-metrics, prometheus-operator's admission webhook)
// compiled once, ours relinked when an input changed. --binaries-only only
// fills the cache (make test-deps runs it, so that the tests find the
// third-party programs built and ours up to date).
//
// Import them into a node's containerd with
// `ctr -n k8s.io images import bin/node-images/NAME.tar`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/rukpak-dev/rukpak/internal/nodeimages"
)

func main() {
	out := flag.String("out", "bin/node-images", "Directory the tarballs are written to (NAME.tar).")
	binariesOnly := flag.Bool("binaries-only", false, "Only compile every image's binary into the cache; no tarballs.")
	flag.Parse()
	o := nodeimages.Options{BuildThirdParty: true}
	if *binariesOnly {
		if flag.NArg() > 0 {
			fmt.Fprintln(os.Stderr, "build: --binaries-only takes no image names")
			os.Exit(2)
		}
		specs := nodeimages.All
		if _, err := nodeimages.Binaries(context.Background(), specs, o); err != nil {
			fmt.Fprintln(os.Stderr, "build:", err)
			os.Exit(1)
		}
		for _, s := range specs {
			fmt.Printf("%s\t%s\n", s.Name, s.Package)
		}
		return
	}
	specs, err := pick(flag.Args())
	if err == nil {
		var tbs []nodeimages.Tarball
		tbs, err = nodeimages.BuildAll(context.Background(), *out, o, specs...)
		for _, t := range tbs {
			fmt.Printf("%s\t%s\t%s\n", t.Path, t.Spec.Ref(), t.ID)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
}

func pick(names []string) ([]nodeimages.Spec, error) {
	var specs []nodeimages.Spec
	for _, n := range names {
		found := false
		for _, s := range nodeimages.All {
			if s.Name == n {
				specs, found = append(specs, s), true
			}
		}
		if !found {
			return nil, fmt.Errorf("no image %q", n)
		}
	}
	return specs, nil
}
