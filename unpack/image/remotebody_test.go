package image

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/unpack"
)

// answerRaw writes an HTTP answer with the server's own status line
// (reason phrase included) and body.
func answerRaw(w http.ResponseWriter, status, contentType, body string) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(buf, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", status, contentType, len(body), body)
	_ = buf.Flush()
}

// TestErrorAnswersShowOnlyProtocolErrors: an image reference may name any
// endpoint the provisioner reaches, and the error ends up in Bundle
// status: of an error answer only the status code and the distribution
// spec's error codes with their messages (sanitised, bounded) reach it;
// never a body, a reason phrase or an error's detail.
func TestErrorAnswersShowOnlyProtocolErrors(t *testing.T) {
	const secret = "s3cr3t-token"
	zeroDigest := "sha256:" + strings.Repeat("0", 64)
	for _, tc := range []struct {
		name, status, body, want string
	}{
		{name: "text body", status: "404 Not Found", body: "internal config: password=" + secret + "\n",
			want: "unexpected status code 404 Not Found"},
		{name: "reason phrase", status: "404 " + secret, body: "",
			want: "unexpected status code 404 Not Found"},
		{name: "registry error", status: "404 Not Found",
			body: `{"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown\u001b[31m", "detail": {"secret": "` + secret + `"}}]}`,
			want: "MANIFEST_UNKNOWN: manifest unknown [31m"},
		{name: "several registry errors", status: "401 Unauthorized",
			body: `{"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}, {"code": "` + secret + `", "message": "` + secret + `"}, {"code": "DENIED", "message": "` + strings.Repeat("x", 300) + `"}]}`,
			want: "multiple errors returned: UNAUTHORIZED: authentication required; DENIED: " + strings.Repeat("x", unpack.MaxExcerpt) + "..."},
		{name: "not an error code", status: "404 Not Found",
			body: `{"errors": [{"code": "` + secret + `", "message": "` + secret + `"}]}`,
			want: "unexpected status code 404 Not Found"},
		{name: "JSON of another kind", status: "404 Not Found",
			body: `{"errors": [{"message": "` + secret + `"}], "data": "` + secret + `"}`,
			want: "unexpected status code 404 Not Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := fakeRegistry(t, func(w http.ResponseWriter, _ *http.Request) {
				answerRaw(w, tc.status, "application/json", tc.body)
			})
			// By digest: no HEAD, whose answers have no body.
			ref := host + "/bundle@" + zeroDigest
			_, err := newUnpacker(t, unpack.Limits{}).Unpack(t.Context(), bundleFor(rukpakv1alpha1.ImageSource{Ref: ref, InsecureSkipTLSVerify: true}))
			if err == nil || !strings.HasSuffix(err.Error(), "GET https://"+host+"/v2/bundle/manifests/"+zeroDigest+": "+tc.want) {
				t.Fatalf("error = %v\nwant one ending in %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the answer: %v", err)
			}
		})
	}
}
