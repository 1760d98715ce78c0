package unpack

import (
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxExcerpt is the most of a remote body that ever reaches a status
// message or a log line.
const MaxExcerpt = 200

// Excerpt reads at most MaxExcerpt bytes of a remote body (an error page, a
// registry's answer) and returns them as one printable line, for a message
// that helps a user without echoing what a hostile server sent. The rest of
// the body is not read.
func Excerpt(r io.Reader) string {
	if r == nil {
		return ""
	}
	buf := make([]byte, MaxExcerpt+1)
	n, _ := io.ReadFull(r, buf)
	return Sanitize(string(buf[:n]))
}

// Sanitize makes s one printable line of at most MaxExcerpt bytes: control
// characters and invalid UTF-8 become spaces, runs of spaces collapse, and a
// cut is marked with "...".
func Sanitize(s string) string {
	cut := len(s) > MaxExcerpt
	if cut {
		s = s[:MaxExcerpt]
	}
	var b strings.Builder
	space := false
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		if r == utf8.RuneError && size <= 1 && cut && len(s) == 0 {
			break // a rune cut in half by the length limit
		}
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	out := strings.TrimSpace(b.String())
	if cut {
		out += "..."
	}
	return out
}
