// Package jsonskim reads the few members wanted of a large JSON object
// from a stream, holding none of the rest: the metadata and status of a
// CustomResourceDefinition whose schema is megabytes, polled until it is
// Established, cost a read buffer of its whole size on every poll.
package jsonskim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// Members names the members of an object kept, each with the names of its
// own members left out (nil: all kept).
type Members map[string][]string

// Object reads one JSON object from r and appends to dst a JSON object of
// its members named in keep, in the order read, each without the members
// keep leaves out of it; everything else is read past, not held. The
// input is checked only as far as skimming needs (strings, nesting); the
// output is as valid as the input was, and meant for a JSON decoder that
// checks it. Names are matched as written, escapes and all (an API server
// never escapes a member name). It reads no further than the object's end
// and at most maxDepth levels deep.
func Object(dst []byte, r *bufio.Reader, keep Members, maxDepth int) ([]byte, error) {
	s := skimmer{r: r, out: dst, maxDepth: maxDepth}
	if err := s.expect('{'); err != nil {
		return dst, err
	}
	s.out = append(s.out, '{')
	first := true
	for {
		key, end, err := s.member(1)
		if err != nil || end {
			s.out = append(s.out, '}')
			return s.out, err
		}
		omit, wanted := keep[string(key[1:len(key)-1])]
		if !wanted {
			if err := s.value(false, nil, 1); err != nil {
				return s.out, err
			}
			continue
		}
		if !first {
			s.out = append(s.out, ',')
		}
		first = false
		s.out = append(s.out, key...)
		s.out = append(s.out, ':')
		if err := s.value(true, omit, 1); err != nil {
			return s.out, err
		}
	}
}

// ErrSyntax says the input is not the JSON skimming expects.
var ErrSyntax = errors.New("not a JSON object")

type skimmer struct {
	r        *bufio.Reader
	out      []byte
	maxDepth int
	key      []byte // the member name being read, quotes and all
}

// unexpected is a read's error: the end of the input is one in the
// middle of the object.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (s *skimmer) next() (byte, error) {
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return 0, unexpected(err)
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c, nil
	}
}

func (s *skimmer) expect(want byte) error {
	c, err := s.next()
	if err != nil {
		return err
	}
	if c != want {
		return fmt.Errorf("%w: %q where %q was expected", ErrSyntax, c, want)
	}
	return nil
}

// member reads the next member name of an object whose "{" or previous
// value was read, and its colon; end says the object ended instead.
func (s *skimmer) member(depth int) (key []byte, end bool, err error) {
	c, err := s.next()
	if err != nil {
		return nil, false, err
	}
	if c == ',' {
		if c, err = s.next(); err != nil {
			return nil, false, err
		}
	}
	if c == '}' {
		return nil, true, nil
	}
	if c != '"' {
		return nil, false, fmt.Errorf("%w: %q where a member name was expected", ErrSyntax, c)
	}
	s.key = append(s.key[:0], '"')
	if s.key, err = s.str(s.key, true); err != nil {
		return nil, false, err
	}
	return s.key, false, s.expect(':')
}

// str reads a string's rest after its opening quote, appending it to
// dst when keep is set.
func (s *skimmer) str(dst []byte, keep bool) ([]byte, error) {
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return dst, unexpected(err)
		}
		if keep {
			dst = append(dst, c)
		}
		switch c {
		case '"':
			return dst, nil
		case '\\':
			e, err := s.r.ReadByte()
			if err != nil {
				return dst, unexpected(err)
			}
			if keep {
				dst = append(dst, e)
			}
		}
	}
}

// value reads one value, copying it to the output when keep is set
// without the members omit names (if it is an object).
func (s *skimmer) value(keep bool, omit []string, depth int) error {
	if depth > s.maxDepth {
		return fmt.Errorf("%w: nested more than %d levels deep", ErrSyntax, s.maxDepth)
	}
	c, err := s.next()
	if err != nil {
		return err
	}
	switch c {
	case '"':
		if keep {
			s.out = append(s.out, '"')
		}
		s.out, err = s.str(s.out, keep)
		return err
	case '{':
		return s.object(keep, omit, depth)
	case '[':
		return s.array(keep, depth)
	}
	// A number, true, false or null: up to the next delimiter.
	if keep {
		s.out = append(s.out, c)
	}
	for {
		b, err := s.r.Peek(1)
		if err != nil {
			return unexpected(err)
		}
		switch b[0] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return nil
		}
		_, _ = s.r.ReadByte()
		if keep {
			s.out = append(s.out, b[0])
		}
	}
}

func (s *skimmer) object(keep bool, omit []string, depth int) error {
	if keep {
		s.out = append(s.out, '{')
	}
	first := true
	for {
		key, end, err := s.member(depth + 1)
		if err != nil {
			return err
		}
		if end {
			if keep {
				s.out = append(s.out, '}')
			}
			return nil
		}
		keepMember := keep && !omitted(omit, key)
		if keepMember {
			if !first {
				s.out = append(s.out, ',')
			}
			first = false
			s.out = append(s.out, key...)
			s.out = append(s.out, ':')
		}
		if err := s.value(keepMember, nil, depth+1); err != nil {
			return err
		}
	}
}

func (s *skimmer) array(keep bool, depth int) error {
	if keep {
		s.out = append(s.out, '[')
	}
	for first := true; ; first = false {
		c, err := s.next()
		if err != nil {
			return err
		}
		if c == ']' {
			if keep {
				s.out = append(s.out, ']')
			}
			return nil
		}
		if !first {
			if c != ',' {
				return fmt.Errorf("%w: %q between array elements", ErrSyntax, c)
			}
		} else if err := s.r.UnreadByte(); err != nil {
			return err
		}
		if keep && !first {
			s.out = append(s.out, ',')
		}
		if err := s.value(keep, nil, depth+1); err != nil {
			return err
		}
	}
}

// omitted says whether key, quotes and all, is one of names.
func omitted(names []string, key []byte) bool {
	for _, n := range names {
		if len(key) == len(n)+2 && string(key[1:len(key)-1]) == n {
			return true
		}
	}
	return false
}
