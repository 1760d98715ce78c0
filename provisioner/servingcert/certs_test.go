package servingcert

import (
	"crypto/x509"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

var (
	t0    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	names = []string{"op-service.op.svc", "op-service.op.svc.cluster.local"}
)

const (
	validity    = 100 * time.Hour
	renewBefore = 20 * time.Hour
)

func issue(t *testing.T, at time.Time, dnsNames []string, previous map[string][]byte) map[string][]byte {
	t.Helper()
	data, err := Issue(at, dnsNames, validity, previous)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDecide(t *testing.T) {
	fresh := issue(t, t0, names, nil)
	other := issue(t, t0, names, nil)
	mixed := map[string][]byte{CertFile: fresh[CertFile], KeyFile: fresh[KeyFile], CAFile: other[CAFile]}
	wrongKey := map[string][]byte{CertFile: fresh[CertFile], KeyFile: other[KeyFile], CAFile: fresh[CAFile]}
	tests := []struct {
		name   string
		now    time.Time
		data   map[string][]byte
		names  []string
		reason string // empty: kept
	}{
		{name: "nothing", now: t0, data: nil, reason: "no certificate yet"},
		{name: "garbage", now: t0, data: map[string][]byte{CertFile: []byte("x"), KeyFile: []byte("y"), CAFile: []byte("z")}, reason: "invalid key pair: tls: failed to find any PEM data in certificate input"},
		{name: "key of another certificate", now: t0, data: wrongKey, reason: "invalid key pair: tls: private key does not match public key"},
		{name: "signed by another CA", now: t0, data: mixed, reason: "certificate is not signed by the CA bundle's first CA"},
		{name: "another name", now: t0, data: fresh, names: []string{"other.op.svc"}, reason: "certificate is not valid for other.op.svc"},
		{name: "not yet valid", now: t0.Add(-2 * time.Hour), data: fresh, reason: "certificate is not valid before 2025-12-31T23:00:00Z"},
		{name: "fresh", now: t0, data: fresh},
		{name: "just before renewal", now: t0.Add(validity - renewBefore - time.Second), data: fresh},
		{name: "due", now: t0.Add(validity - renewBefore), data: fresh, reason: "certificate expires at 2026-01-05T04:00:00Z"},
		{name: "expired", now: t0.Add(validity + time.Hour), data: fresh, reason: "certificate expires at 2026-01-05T04:00:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.names
			if n == nil {
				n = names
			}
			d := Decide(tc.now, tc.data, n, renewBefore)
			if d.Renew != (tc.reason != "") || d.Reason != tc.reason {
				t.Fatalf("got renew=%v reason %q, want reason %q", d.Renew, d.Reason, tc.reason)
			}
			if !d.Renew && !d.RenewAt.Equal(t0.Add(validity-renewBefore)) {
				t.Fatalf("renew at %s, want %s", d.RenewAt, t0.Add(validity-renewBefore))
			}
		})
	}
}

// A renewal keeps the previous CA in the bundle, after the new one, so the
// previous certificate stays trusted until pods load the new one; the CA
// before that is dropped.
func TestIssueKeepsPreviousCA(t *testing.T) {
	first := issue(t, t0, names, nil)
	second := issue(t, t0.Add(90*time.Hour), names, first)
	third := issue(t, t0.Add(180*time.Hour), names, second)
	for i, tc := range []struct {
		data    map[string][]byte
		trusted []map[string][]byte // certificates the bundle verifies
		not     []map[string][]byte
		at      time.Time
	}{
		{data: first, trusted: []map[string][]byte{first}, at: t0},
		{data: second, trusted: []map[string][]byte{second, first}, at: t0.Add(90 * time.Hour)},
		{data: third, trusted: []map[string][]byte{third, second}, not: []map[string][]byte{first}, at: t0.Add(180 * time.Hour)},
	} {
		cas, err := parseCerts(tc.data[CAFile])
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		for _, ca := range cas {
			pool.AddCert(ca)
		}
		verify := func(d map[string][]byte) error {
			certs, err := parseCerts(d[CertFile])
			if err != nil {
				return err
			}
			// Time of the certificate's own issue, so only the chain is tested.
			_, err = certs[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: names[1], CurrentTime: certs[0].NotBefore.Add(2 * time.Hour)})
			return err
		}
		for j, d := range tc.trusted {
			if err := verify(d); err != nil {
				t.Errorf("bundle %d does not trust certificate %d: %v", i, j, err)
			}
		}
		for j, d := range tc.not {
			if verify(d) == nil {
				t.Errorf("bundle %d still trusts certificate %d", i, j)
			}
		}
		if d := Decide(tc.at, tc.data, names, renewBefore); d.Renew {
			t.Errorf("issued data %d is not kept: %s", i, d.Reason)
		}
	}
	// An expired previous CA is not carried.
	late := issue(t, t0.Add(validity+2*time.Hour), names, first)
	if cas, _ := parseCerts(late[CAFile]); len(cas) != 1 {
		t.Fatalf("bundle after an expired CA holds %d CAs, want 1", len(cas))
	}
}

func objects(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "---\n") {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

const content = `apiVersion: v1
kind: Secret
metadata:
  name: op-service-cert
  namespace: op
  annotations: {core.rukpak.io/serving-certificate-dns-names: "op-service.op.svc,op-service.op.svc.cluster.local"}
type: kubernetes.io/tls
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: v
  annotations: {core.rukpak.io/inject-ca-from: op/op-service-cert}
webhooks:
- name: a
  clientConfig: {service: {name: op-service, namespace: op}}
- name: b
  clientConfig: {service: {name: op-service, namespace: op}}
  namespaceSelector: {matchLabels: {team: x}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: foos.example.com
  annotations: {core.rukpak.io/inject-ca-from: op/op-service-cert}
spec:
  conversion: {strategy: Webhook, webhook: {clientConfig: {service: {name: op-service, namespace: op}}}}
`

func TestPlaceholderAndExclude(t *testing.T) {
	objs := objects(t, content)
	if err := Placeholder(objs); err != nil {
		t.Fatal(err)
	}
	if err := ExcludeNamespace(objs, "rukpak-system"); err != nil {
		t.Fatal(err)
	}
	ca := base64.StdEncoding.EncodeToString([]byte(PlaceholderCA))
	hooks, _, _ := unstructured.NestedSlice(objs[1].Object, "webhooks")
	for i, h := range hooks {
		got, _, _ := unstructured.NestedString(h.(map[string]interface{}), "clientConfig", "caBundle")
		if got != ca {
			t.Errorf("webhook %d caBundle %q, want the placeholder", i, got)
		}
	}
	b, _ := yaml.Marshal(hooks[1].(map[string]interface{})["namespaceSelector"])
	if want := "matchExpressions:\n- key: kubernetes.io/metadata.name\n  operator: NotIn\n  values:\n  - rukpak-system\nmatchLabels:\n  team: x\n"; string(b) != want {
		t.Errorf("namespaceSelector:\n%s\nwant:\n%s", b, want)
	}
	got, _, _ := unstructured.NestedString(objs[2].Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	if got != ca {
		t.Errorf("CRD caBundle %q, want the placeholder", got)
	}
	data, _, _ := unstructured.NestedStringMap(objs[0].Object, "data")
	if len(data) != 3 {
		t.Errorf("Secret data %v, want tls.crt, tls.key and ca.crt", data)
	}
}

func TestInjectRefusesUnknownSecret(t *testing.T) {
	objs := objects(t, content)[1:]
	err := Placeholder(objs)
	want := `ValidatingWebhookConfiguration "v": annotation core.rukpak.io/inject-ca-from names Secret "op/op-service-cert", which is not a certificate Secret of the same content (annotated core.rukpak.io/serving-certificate-dns-names)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}
