package release

import (
	"bufio"
	"errors"
	"strings"
	"testing"

	"github.com/rukpak-dev/rukpak/internal/jsonskim"
)

// TestCRDBodyLimit: a body past the limit is told apart from one cut
// short, through the skim.
func TestCRDBodyLimit(t *testing.T) {
	body := `{"metadata":{"name":"a"},"spec":{"x":"` + strings.Repeat("y", 100) + `"},"status":{}}`
	for _, tc := range []struct {
		limit int64
		want  error
	}{
		{limit: int64(len(body)), want: nil},
		{limit: int64(len(body)) - 1, want: errBodyTooLarge},
		{limit: 10, want: errBodyTooLarge},
	} {
		r := bufio.NewReaderSize(&bodyLimit{r: strings.NewReader(body), n: tc.limit}, 16)
		out, err := jsonskim.Object(nil, r, crdKept, maxCRDDepth)
		if !errors.Is(err, tc.want) {
			t.Errorf("limit %d: %v, want %v", tc.limit, err, tc.want)
		}
		if err == nil && string(out) != `{"metadata":{"name":"a"},"status":{}}` {
			t.Errorf("limit %d: kept %s", tc.limit, out)
		}
	}
}
