package release

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestParallelErrorsAreBoundedAndStable(t *testing.T) {
	sentinel := errors.New("sentinel")
	cases := []struct {
		failing int
		want    string
	}{
		{0, ""},
		{3, "object 0 failed\nobject 1 failed\nobject 2 failed"},
		{12, "object 0 failed\nobject 1 failed\nobject 10 failed\nobject 11 failed\nobject 2 failed\nobject 3 failed\nobject 4 failed\nobject 5 failed\nobject 6 failed\nobject 7 failed\nand 2 more"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.failing), func(t *testing.T) {
			objs := make([]*unstructured.Unstructured, 20)
			for i := range objs {
				objs[i] = configMap("ns", fmt.Sprint(i), "")
			}
			err := parallel(objs, func(o *unstructured.Unstructured) error {
				i, err := strconv.Atoi(o.GetName())
				if err != nil {
					return err
				}
				if i < tc.failing {
					return fmt.Errorf("object %d failed: %w", i, sentinel)
				}
				return nil
			})
			got := ""
			if err != nil {
				got = strings.ReplaceAll(err.Error(), ": sentinel", "")
			}
			if got != tc.want {
				t.Errorf("message %q\nwant %q", got, tc.want)
			}
			if (err != nil) != errors.Is(err, sentinel) {
				t.Errorf("errors.Is does not see the wrapped errors")
			}
		})
	}
}
