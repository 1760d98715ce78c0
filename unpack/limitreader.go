package unpack

import "io"

// LimitReader returns a Reader that fails with tooLarge(limit) once r has
// given more than limit bytes. Unlike io.LimitReader an oversized input is
// an error, not a silent truncation, and an endless one costs at most
// limit+1 bytes.
func LimitReader(r io.Reader, limit int64, tooLarge func(limit int64) error) io.Reader {
	return &limitReader{r: r, left: limit, limit: limit, tooLarge: tooLarge}
}

type limitReader struct {
	r           io.Reader
	left, limit int64
	tooLarge    func(int64) error
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, l.tooLarge(l.limit)
	}
	// One byte past the limit tells "exactly the limit" from "more".
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return 0, l.tooLarge(l.limit)
	}
	return n, err
}
