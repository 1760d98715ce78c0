package unpack

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxExcerpt is the most of a protocol message (a registry's error message,
// a git server's ERR line) that ever reaches a status message or a log
// line.
const MaxExcerpt = 200

// StatusText is an HTTP answer's status as a message shows it: the code and
// Go's text for it. The server's own reason phrase and body never reach a
// message: the source's URL may be any endpoint the provisioner reaches,
// and Bundle status is readable by everyone who may view the namespace.
func StatusText(code int) string {
	return strings.TrimSpace(fmt.Sprintf("%d %s", code, http.StatusText(code)))
}

// Excerpt reads at most MaxExcerpt bytes of a body and returns them as one
// printable line. Only for the answers of the provisioner's own services
// (the content service); a source's answers are reported by StatusText and
// what their protocol defines (registry error codes, git ERR lines), never
// by their body. The rest of the body is not read.
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
