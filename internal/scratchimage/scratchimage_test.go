package scratchimage

import (
	"archive/tar"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func spec() Spec {
	return Spec{
		Files: append(Accounts("nonroot", 65532, 65532, "/home/nonroot"),
			File{Name: "tmp", Dir: true, Mode: 0o1777},
			File{Name: "bin", Mode: 0o755, Data: []byte("binary")},
			File{Name: "home", Dir: true, Mode: 0o755},
			File{Name: "home/nonroot", Dir: true, Mode: 0o700, UID: 65532, GID: 65532},
		),
		Created: time.Unix(1700000000, 0),
		OS:      "linux",
		Arch:    "amd64",
		History: v1.History{CreatedBy: "test", Comment: "test"},
		Config:  v1.Config{User: "65532:65532", Entrypoint: []string{"/bin"}},
	}
}

func digest(t *testing.T, s Spec) (v1.Image, v1.Hash) {
	t.Helper()
	img, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return img, d
}

// TestBuildIsReproducible: the same spec gives the same digest, whatever
// the order of its files; every input shows in the digest.
func TestBuildIsReproducible(t *testing.T) {
	_, want := digest(t, spec())
	reversed := spec()
	slices.Reverse(reversed.Files)
	if _, got := digest(t, reversed); got != want {
		t.Errorf("files in another order: %s, want %s", got, want)
	}
	for name, change := range map[string]func(*Spec){
		"a file's bytes": func(s *Spec) { file(s, "bin").Data = []byte("other") },
		"a file's mode":  func(s *Spec) { file(s, "tmp").Mode = 0o700 },
		"a file's owner": func(s *Spec) { file(s, "bin").UID = 1 },
		"the created time": func(s *Spec) {
			s.Created = s.Created.Add(time.Second)
		},
		"the user":     func(s *Spec) { s.Config.User = "1000:1000" },
		"the arch":     func(s *Spec) { s.Arch = "arm64" },
		"the history":  func(s *Spec) { s.History.CreatedBy = "other" },
		"gzip (layer)": func(s *Spec) { s.Gzip = true },
	} {
		s := spec()
		change(&s)
		if _, got := digest(t, s); got == want {
			t.Errorf("changing %s left the digest %s", name, got)
		}
	}
}

func file(s *Spec, name string) *File {
	for i := range s.Files {
		if s.Files[i].Name == name {
			return &s.Files[i]
		}
	}
	panic("no file " + name)
}

func TestLayerRefusesDataInADirectory(t *testing.T) {
	_, err := Layer([]File{{Name: "etc", Dir: true, Data: []byte("x")}}, time.Unix(0, 0))
	if err == nil || !strings.Contains(err.Error(), "etc: a directory cannot hold data") {
		t.Errorf("got %v", err)
	}
}

// TestBuildLayout: the layer's entries are sorted, typed, owned and timed
// as the spec says, and the config carries the spec's runtime settings.
func TestBuildLayout(t *testing.T) {
	for _, gz := range []bool{false, true} {
		s := spec()
		s.Gzip = gz
		img, _ := digest(t, s)
		entries, err := Contents(img)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Header.Name)
			if !e.Header.ModTime.Equal(s.Created) {
				t.Errorf("%s: mtime %v, want %v", e.Header.Name, e.Header.ModTime, s.Created)
			}
			if e.Header.Uname != "" || e.Header.Gname != "" {
				t.Errorf("%s: owner names %q:%q, want numeric owners only", e.Header.Name, e.Header.Uname, e.Header.Gname)
			}
		}
		want := []string{"bin", "etc/", "etc/group", "etc/passwd", "home/", "home/nonroot/", "tmp/"}
		if !reflect.DeepEqual(names, want) {
			t.Errorf("gzip %v: entries %q, want %q", gz, names, want)
		}
		byName := map[string]Entry{}
		for _, e := range entries {
			byName[e.Header.Name] = e
		}
		if h := byName["tmp/"].Header; h.Typeflag != tar.TypeDir || h.Mode != 0o1777 {
			t.Errorf("tmp/: type %c mode %o", h.Typeflag, h.Mode)
		}
		if h := byName["home/nonroot/"].Header; h.Uid != 65532 || h.Gid != 65532 {
			t.Errorf("home/nonroot/: owner %d:%d", h.Uid, h.Gid)
		}
		if e := byName["bin"]; e.Header.Typeflag != tar.TypeReg || string(e.Data) != "binary" || e.Header.Mode != 0o755 {
			t.Errorf("bin: %+v %q", e.Header, e.Data)
		}
		layers, _ := img.Layers()
		wantType := types.OCIUncompressedLayer
		if gz {
			wantType = types.OCILayer
		}
		if mt, err := layers[0].MediaType(); err != nil || mt != wantType {
			t.Errorf("gzip %v: layer media type %q (%v), want %q", gz, mt, err, wantType)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Equal(s.Created) || cf.Author != "" {
			t.Errorf("config: os %q arch %q created %v author %q", cf.OS, cf.Architecture, cf.Created, cf.Author)
		}
		if !reflect.DeepEqual(cf.Config, s.Config) {
			t.Errorf("runtime config %+v, want %+v", cf.Config, s.Config)
		}
		if len(cf.History) != 1 || cf.History[0].CreatedBy != "test" || !cf.History[0].Created.Equal(s.Created) {
			t.Errorf("history %+v", cf.History)
		}
		if mt, err := img.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
			t.Errorf("manifest media type %q, %v", mt, err)
		}
	}
}

// TestGzipKeepsImageID: compressing the layer changes the manifest, not
// the image ID (the config digest) that containerd shows.
func TestGzipKeepsImageID(t *testing.T) {
	plain, _ := digest(t, spec())
	s := spec()
	s.Gzip = true
	gz, _ := digest(t, s)
	a, errA := plain.ConfigName()
	b, errB := gz.ConfigName()
	if errA != nil || errB != nil || a != b {
		t.Errorf("image IDs %v (%v) and %v (%v), want equal", a, errA, b, errB)
	}
}

func TestZeroCreatedIsTheEpoch(t *testing.T) {
	s := spec()
	s.Created = time.Time{}
	img, _ := digest(t, s)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !cf.Created.Equal(time.Unix(0, 0)) {
		t.Errorf("created %v, want the Unix epoch", cf.Created)
	}
}

func TestAccounts(t *testing.T) {
	for _, tc := range []struct {
		name             string
		user             string
		uid, gid         int
		passwdLine       string
		groupLine        string
		passwdN, groupsN int
	}{
		{"nonroot", "nonroot", 65532, 65532, "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin", "nonroot:x:65532:", 3, 3},
		{"nobody is listed once", "nobody", Nobody, Nobody, "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin", "nobody:x:65534:", 2, 2},
		{"own user in nobody's group", "pause", 65535, Nobody, "pause:x:65535:65534:pause:/home/nonroot:/sbin/nologin", "nobody:x:65534:", 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := Accounts(tc.user, tc.uid, tc.gid, "/home/nonroot")
			if len(files) != 3 || !files[0].Dir || files[0].Name != "etc" {
				t.Fatalf("files %+v, want etc/, etc/passwd, etc/group", files)
			}
			passwd, group := string(files[1].Data), string(files[2].Data)
			if !strings.HasPrefix(passwd, "root:x:0:0:") || !strings.Contains(passwd, tc.passwdLine+"\n") || strings.Count(passwd, "\n") != tc.passwdN {
				t.Errorf("passwd:\n%s", passwd)
			}
			if !strings.HasPrefix(group, "root:x:0:\n") || !strings.Contains(group, tc.groupLine+"\n") || strings.Count(group, "\n") != tc.groupsN {
				t.Errorf("group:\n%s", group)
			}
		})
	}
}

func TestCheckStatic(t *testing.T) {
	if err := CheckStatic([]byte("#!/bin/sh\n")); !errors.Is(err, ErrNotELF) {
		t.Errorf("a shell script: %v, want ErrNotELF", err)
	}
	for _, p := range []string{"/bin/sh", "/usr/bin/env"} {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		err = CheckStatic(data)
		if err == nil || errors.Is(err, ErrNotELF) || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Errorf("%s (dynamically linked): %v", p, err)
		}
		return
	}
	t.Skip("no dynamically linked host binary to check against")
}
