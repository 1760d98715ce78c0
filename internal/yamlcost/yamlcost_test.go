package yamlcost

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	laughs := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i, prev := 0, "a"; i < 8; i++ {
		name := string(rune('b' + i))
		laughs += name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = name
	}
	for _, tc := range []struct {
		name, text string
		want       string // error words; "" accepts
	}{
		{"a manifest", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: v\n", ""},
		{"JSON", `{"a": [1, 2, {"b": "c"}]}`, ""},
		{"deep block nesting", nested(40), "is nested more than 32 levels deep"},
		{"deep flow nesting", strings.Repeat("[", 40) + strings.Repeat("]", 40), "is nested more than 32 levels deep"},
		{"many nodes", strings.Repeat("- x\n", 2000), "has more than 1000 YAML nodes"},
		{"billion laughs", laughs, "expands to more than 1000 YAML nodes through aliases"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check([]byte(tc.text), 1000, 32)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func nested(n int) string {
	var sb strings.Builder
	for i := range n {
		sb.WriteString(strings.Repeat("  ", i) + "k:\n")
	}
	return sb.String()
}

func TestCheckJSON(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       string // error words; "" accepts
	}{
		{"an object", `{"a":[1,2,{"b":"c"}]}`, ""},
		// Check reads each ": " and "- " of a one-line document as a
		// level; inside strings they are text.
		{"strings that look like YAML", `{"description":"` + strings.Repeat("a: b - c, [d] {e} ", 100) + `"}`, ""},
		{"escaped quotes", `{"a":"\\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"}`, ""},
		{"deep nesting", strings.Repeat("[", 33) + strings.Repeat("]", 33), "is nested more than 32 levels deep"},
		{"deep objects", strings.Repeat(`{"a":`, 33) + "1" + strings.Repeat("}", 33), "is nested more than 32 levels deep"},
		{"many values", "[" + strings.Repeat("1,", 1000) + "1]", "has more than 1000 YAML nodes"},
		{"many keys", "{" + strings.Repeat(`"k":1,`, 500) + `"k":1}`, "has more than 1000 YAML nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckJSON([]byte(tc.text), 1000, 32)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
