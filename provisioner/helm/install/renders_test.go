package install

import (
	"errors"
	"testing"
	"time"
)

// renders keeps what it is given until its time is up, the release is
// forgotten, or it is the least recently used beyond its bounds.
func TestRendersCache(t *testing.T) {
	c := newRenders()
	a := renderKey{release: "a", digest: "1"}
	b := renderKey{release: "b", digest: "1"}
	refused := errors.New("refused")
	c.put(a, nil, refused, time.Minute)
	c.put(b, nil, refused, time.Minute)
	if e, ok := c.get(a, time.Minute); !ok || !errors.Is(e.err, refused) {
		t.Fatalf("a: %v %v, want the refusal kept", e, ok)
	}
	if _, ok := c.get(renderKey{release: "a", digest: "2"}, time.Minute); ok {
		t.Error("another digest found a's render")
	}
	if _, ok := c.get(a, 0); ok {
		t.Error("a render older than the ttl was returned")
	}
	if _, ok := c.get(a, time.Minute); ok {
		t.Error("an expired render was kept")
	}
	c.forget("b")
	if _, ok := c.get(b, time.Minute); ok || c.len() != 0 || c.bytes() != 0 {
		t.Errorf("after forget: %d entries, %d bytes", c.len(), c.bytes())
	}

	for i := range maxRenders + 10 {
		c.put(renderKey{release: "r", last: i}, nil, refused, time.Minute)
		if i == maxRenders-1 {
			// Used: the least recently used go first.
			if _, ok := c.get(renderKey{release: "r", last: 0}, time.Minute); !ok {
				t.Fatal("render 0 not kept")
			}
		}
	}
	if c.len() != maxRenders {
		t.Errorf("%d entries kept, want %d", c.len(), maxRenders)
	}
	if _, ok := c.get(renderKey{release: "r", last: 0}, time.Minute); !ok {
		t.Error("the recently used render 0 was dropped")
	}
	if _, ok := c.get(renderKey{release: "r", last: 1}, time.Minute); ok {
		t.Error("the least recently used render 1 was kept")
	}
	c.forget("r")
	if c.len() != 0 || c.bytes() != 0 {
		t.Errorf("after forget: %d entries, %d bytes", c.len(), c.bytes())
	}

	// A put drops what expired, used or not.
	c.put(a, nil, refused, time.Minute)
	c.put(b, nil, refused, 0)
	if c.lru.Contains(a) || c.len() != 1 {
		t.Errorf("%d entries after a put with ttl 0, want b alone", c.len())
	}
}

func (c *renders) len() int { n, _ := c.lru.Stats(); return n }

func (c *renders) bytes() int64 { _, b := c.lru.Stats(); return b }
