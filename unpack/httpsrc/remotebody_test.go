package httpsrc_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/rukpak-dev/rukpak/unpack"
)

// answerRaw writes an HTTP answer with the server's own status line
// (reason phrase included) and body.
func answerRaw(w http.ResponseWriter, status, body string) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(buf, "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", status, len(body), body)
	_ = buf.Flush()
}

// TestErrorAnswersShowOnlyTheStatusCode: the URL may name any endpoint the
// provisioner reaches, and the error ends up in Bundle status: neither the
// answer's body nor its reason phrase reach the error, only the code.
func TestErrorAnswersShowOnlyTheStatusCode(t *testing.T) {
	const secret = "s3cr3t-token"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/404":
			answerRaw(w, "404 Not Found", "internal config: password="+secret+"\n")
		case "/reason":
			answerRaw(w, "403 "+secret, "denied")
		case "/500":
			answerRaw(w, "500 Internal Server Error", `{"error": "`+secret+`"}`)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		path, status string
		terminal     bool
	}{
		{"/404", "404 Not Found", true},
		{"/reason", "403 Forbidden", true},
		{"/500", "500 Internal Server Error", false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			_, err := newUnpacker(t, unpack.Limits{}).Unpack(t.Context(), bundleFor(srv.URL+tc.path, "", false))
			want := "GET " + srv.URL + tc.path + ": unexpected status " + strconv.Quote(tc.status)
			if err == nil || err.Error() != want {
				t.Fatalf("error = %v, want %q", err, want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the answer: %v", err)
			}
			if unpack.IsTerminal(err) != tc.terminal {
				t.Errorf("terminal = %v, want %v", unpack.IsTerminal(err), tc.terminal)
			}
		})
	}
}
