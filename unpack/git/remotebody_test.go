package git_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
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

// TestErrorAnswersShowOnlyTheStatusCode: a repository URL may name any
// endpoint the provisioner reaches, and the error ends up in Bundle
// status: an error answer's body and reason phrase never reach it, only
// the status code.
func TestErrorAnswersShowOnlyTheStatusCode(t *testing.T) {
	const secret = "s3cr3t-token"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/404/"):
			answerRaw(w, "404 Not Found", "internal config: password="+secret+"\n")
		case strings.HasPrefix(r.URL.Path, "/reason/"):
			answerRaw(w, "403 "+secret, "denied")
		default:
			answerRaw(w, "500 Internal Server Error", `{"error": "`+secret+`"}`)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		path, want string
		terminal   bool
	}{
		{"/404/repo", `repository "%s" not found: repository not found: 404 Not Found`, true},
		{"/reason/repo", `access to repository "%s" denied: authorization failed: 403 Forbidden`, true},
		{"/500/repo", `fetching repository "%s": unexpected client error: unexpected requesting "%[1]s/info/refs?service=git-upload-pack" status code: 500`, false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			src := rukpakv1alpha1.GitSource{Repository: srv.URL + tc.path, Ref: rukpakv1alpha1.GitRef{Branch: "main"}}
			_, err := unpacker(t, unpack.Limits{}).Unpack(t.Context(), bundle(src))
			if want := fmt.Sprintf(tc.want, src.Repository); err == nil || err.Error() != want {
				t.Fatalf("error = %v\nwant    %q", err, want)
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
