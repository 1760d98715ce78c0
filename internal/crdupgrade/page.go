package crdupgrade

import (
	"context"
	"errors"
	"fmt"
	"io"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rukpak-dev/rukpak/internal/jsonmap"
	"github.com/rukpak-dev/rukpak/internal/liststream"
)

// minObjectBytes is the object size a page's length is computed with when
// every object seen so far was smaller: pages of small objects are at most
// PageSize long anyway.
const minObjectBytes = 1 << 10

// run reads the objects of p.listVersion page by page, one object at a
// time, and judges each; s counts the bytes of every pass of the CRD.
func (p *pass) run(ctx context.Context, l Lister, old *apiextensionsv1.CustomResourceDefinition, s *stream) error {
	opts := s.opts
	gvr := schema.GroupVersionResource{Group: old.Spec.Group, Version: p.listVersion, Resource: old.Spec.Names.Plural}
	cont := ""
	for {
		limit := min(max(opts.pageBytes()/max(s.largest, minObjectBytes), 1), opts.pageSize())
		if s.largest == 0 {
			// Nothing read yet: the objects may all be of the largest size.
			limit = min(max(opts.pageBytes()/opts.maxObjectBytes(), 1), opts.pageSize())
		}
		body, err := l.ListJSON(ctx, gvr, metav1.ListOptions{Limit: limit, Continue: cont})
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return err
		}
		cont, err = s.page(ctx, body, func(u *unstructured.Unstructured) { p.judge(ctx, u, opts) })
		_ = body.Close()
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return err
		}
		if cont == "" {
			return nil
		}
	}
}

// stream decodes the pages of one CRD's passes.
type stream struct {
	opts   Options
	budget *Budget
	// largest is the largest object read so far, total all bytes read.
	largest, total int64
	last           string // the last object read, for messages
}

// page reads one list response, decoding its items one at a time into
// each (which must not keep them), and returns its continue token.
func (s *stream) page(ctx context.Context, body io.Reader, each func(*unstructured.Unstructured)) (string, error) {
	cont, err := liststream.Items(ctx, body, s.opts.maxObjectBytes(), func(raw []byte) error { return s.object(ctx, raw, each) })
	var tooLarge *liststream.TooLargeError
	if errors.As(err, &tooLarge) {
		exceeded := ""
		if tooLarge.Size > 0 {
			exceeded = "is " + formatBytes(tooLarge.Size)
		}
		name := tooLarge.Name
		switch {
		case name == "" && s.last != "":
			name = "after " + s.last
		case name == "":
			name = "(name not found)"
		}
		return "", &BudgetError{Object: name, Exceeded: exceeded, Limit: s.opts.maxObjectBytes(), Flag: FlagMaxObjectBytes}
	}
	return cont, err
}

// object decodes and judges one object within the budgets.
func (s *stream) object(ctx context.Context, raw []byte, each func(*unstructured.Unstructured)) error {
	size := int64(len(raw))
	s.total += size
	if s.total > s.opts.maxBytes() {
		return &BudgetError{Exceeded: fmt.Sprintf("read so far take %s", formatBytes(s.total)), Limit: s.opts.maxBytes(), Flag: FlagMaxBytes}
	}
	s.largest = max(s.largest, size)
	c := cost(raw)
	if c > s.budget.size {
		return &BudgetError{Object: liststream.ObjectName(raw), Exceeded: fmt.Sprintf("(%s) would take about %s to decode and validate", formatBytes(size), formatBytes(c)),
			Limit: s.budget.size, Flag: FlagMemoryBytes}
	}
	if err := s.budget.sem.Acquire(ctx, c); err != nil {
		return err
	}
	defer s.budget.sem.Release(c)
	fields, err := jsonmap.Unmarshal(raw)
	if err != nil {
		return fmt.Errorf("decoding object %s: %w", liststream.ObjectName(raw), err)
	}
	u := &unstructured.Unstructured{Object: fields}
	s.last = liststream.ObjectName(raw)
	each(u)
	return nil
}
