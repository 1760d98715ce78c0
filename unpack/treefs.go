package unpack

import (
	"io"
	"io/fs"
	"path"
	"time"
)

// treeFS is a read-only view of a Tree: the index says where each file's
// bytes are in the spool.
type treeFS struct {
	data     io.ReaderAt
	nodes    map[string]node
	children map[string][]string
}

var (
	_ fs.ReadDirFS  = (*treeFS)(nil)
	_ fs.StatFS     = (*treeFS)(nil)
	_ fs.ReadFileFS = (*treeFS)(nil)
)

func (f *treeFS) lookup(op, name string) (node, error) {
	if !fs.ValidPath(name) {
		return node{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	n, ok := f.nodes[name]
	if !ok {
		return node{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

func (f *treeFS) Open(name string) (fs.File, error) {
	n, err := f.lookup("open", name)
	if err != nil {
		return nil, err
	}
	info := fileInfo{name: path.Base(name), node: n}
	if n.Dir {
		return &treeDir{info: info, fsys: f, path: name}, nil
	}
	return &treeFile{info: info, SectionReader: io.NewSectionReader(f.data, n.Offset, n.Size)}, nil
}

func (f *treeFS) Stat(name string) (fs.FileInfo, error) {
	n, err := f.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return fileInfo{name: path.Base(name), node: n}, nil
}

func (f *treeFS) ReadFile(name string) ([]byte, error) {
	n, err := f.lookup("read", name)
	if err != nil {
		return nil, err
	}
	if n.Dir {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrInvalid}
	}
	b := make([]byte, n.Size)
	if _, err := io.ReadFull(io.NewSectionReader(f.data, n.Offset, n.Size), b); err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return b, nil
}

func (f *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	n, err := f.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.Dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	return f.entries(name), nil
}

func (f *treeFS) entries(dir string) []fs.DirEntry {
	names := f.children[dir]
	out := make([]fs.DirEntry, 0, len(names))
	for _, c := range names {
		p := c
		if dir != "." {
			p = dir + "/" + c
		}
		out = append(out, fs.FileInfoToDirEntry(fileInfo{name: c, node: f.nodes[p]}))
	}
	return out
}

type fileInfo struct {
	name string
	node node
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.node.Size }
func (i fileInfo) Mode() fs.FileMode  { return i.node.mode() }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.node.Dir }
func (i fileInfo) Sys() any           { return nil }

type treeFile struct {
	info fileInfo
	*io.SectionReader
}

func (f *treeFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *treeFile) Close() error               { return nil }

type treeDir struct {
	info fileInfo
	fsys *treeFS
	path string
	left []fs.DirEntry
	read bool
}

func (d *treeDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *treeDir) Close() error               { return nil }
func (d *treeDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.path, Err: fs.ErrInvalid}
}

func (d *treeDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.read {
		d.left, d.read = d.fsys.entries(d.path), true
	}
	if n <= 0 {
		out := d.left
		d.left = nil
		return out, nil
	}
	if len(d.left) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.left))
	out := d.left[:n]
	d.left = d.left[n:]
	return out, nil
}
