package release

import "testing"

// TestSettled: the fingerprint an Apply's own writes leave is told only
// when what the informer shows is accounted for by what it showed before
// the writes and the writes themselves.
func TestSettled(t *testing.T) {
	for _, tc := range []struct {
		name               string
		before, wrote, now map[string]string
		want               string
		ok                 bool
	}{
		{
			name:  "first install, informer behind",
			wrote: map[string]string{"v1": "u1@10"},
			want:  "v1@u1@10", ok: true,
		},
		{
			name:  "first install, informer caught up",
			wrote: map[string]string{"v1": "u1@10"},
			now:   map[string]string{"v1": "u1@10"},
			want:  "v1@u1@10", ok: true,
		},
		{
			name:   "upgrade: the new revision created, the old one superseded",
			before: map[string]string{"v1": "u1@10"},
			wrote:  map[string]string{"v2": "u2@12", "v1": "u1@13"},
			now:    map[string]string{"v1": "u1@10"},
			want:   "v1@u1@13,v2@u2@12", ok: true,
		},
		{
			name:   "history pruned",
			before: map[string]string{"v1": "u1@10", "v2": "u2@11"},
			wrote:  map[string]string{"v3": "u3@12", "v1": ""},
			now:    map[string]string{"v1": "u1@10", "v2": "u2@11"},
			want:   "v2@u2@11,v3@u3@12", ok: true,
		},
		{
			name:   "our record already written again by someone else: told, and it will not match",
			before: map[string]string{},
			wrote:  map[string]string{"v1": "u1@10"},
			now:    map[string]string{"v1": "u1@15"},
			want:   "v1@u1@10", ok: true,
		},
		{
			name:   "a record someone else created meanwhile",
			before: map[string]string{"v1": "u1@10"},
			wrote:  map[string]string{"v2": "u2@12"},
			now:    map[string]string{"v1": "u1@10", "v3": "u3@14"},
		},
		{
			name:   "a record someone else changed meanwhile",
			before: map[string]string{"v1": "u1@10"},
			wrote:  map[string]string{"v2": "u2@12"},
			now:    map[string]string{"v1": "u1@14"},
		},
		{
			name:   "a record deleted and created again meanwhile",
			before: map[string]string{"v1": "u1@10"},
			wrote:  map[string]string{"v2": "u2@12"},
			now:    map[string]string{"v1": "u9@14"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := settled(tc.before, tc.wrote, tc.now)
			if ok != tc.ok || got != tc.want {
				t.Errorf("settled = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
