package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// The chart's hook Jobs' arguments, word for word (release "adm",
// namespace "mon"): templates/hooks/job-createSecret.yaml and
// job-patchWebhook.yaml of prometheus-operator-admission-webhook.
var (
	createArgs = []string{"create", "--host=adm-paw,adm-paw.mon.svc", "--namespace=mon", "--secret-name=adm-paw", "--cert-name=tls.crt", "--key-name=tls.key"}
	patchArgs  = []string{"patch", "--namespace=mon", "--secret-name=adm-paw", "--webhook-name=adm-paw"}
)

func clientOf(cs kubernetes.Interface) newClient {
	return func(string) (kubernetes.Interface, error) { return cs, nil }
}

func webhookConfigs() (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	meta := metav1.ObjectMeta{Name: "adm-paw"}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: meta, Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "a.example.com"}, {Name: "b.example.com"}}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: meta, Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.example.com"}}}
}

func TestCreateThenPatch(t *testing.T) {
	vwc, mwc := webhookConfigs()
	cs := fake.NewClientset(vwc, mwc)
	var logs bytes.Buffer
	if err := run(t.Context(), createArgs, &logs, clientOf(cs)); err != nil {
		t.Fatal(err)
	}
	s, err := cs.CoreV1().Secrets("mon").Get(t.Context(), "adm-paw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Data) != 3 || len(s.Data["ca.crt"]) == 0 {
		t.Fatalf("Secret keys %v, want ca.crt, tls.crt, tls.key", s.Data)
	}
	pair, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data["ca.crt"]) {
		t.Fatal("ca.crt holds no certificate")
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	// The API server calls the webhook by its Service's name.
	for _, host := range []string{"adm-paw", "adm-paw.mon.svc"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("certificate for %s: %v", host, err)
		}
	}

	// A second run (pre-upgrade) keeps the Secret as it is.
	logs.Reset()
	if err := run(t.Context(), createArgs, &logs, clientOf(cs)); err != nil {
		t.Fatal(err)
	}
	again, _ := cs.CoreV1().Secrets("mon").Get(t.Context(), "adm-paw", metav1.GetOptions{})
	if !bytes.Equal(again.Data["tls.crt"], s.Data["tls.crt"]) || !strings.Contains(logs.String(), "secret already exists") {
		t.Fatalf("the second create replaced the Secret; logs: %s", logs.String())
	}

	if err := run(t.Context(), patchArgs, &logs, clientOf(cs)); err != nil {
		t.Fatal(err)
	}
	gotV, _ := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), "adm-paw", metav1.GetOptions{})
	gotM, _ := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), "adm-paw", metav1.GetOptions{})
	for _, b := range [][]byte{gotV.Webhooks[0].ClientConfig.CABundle, gotV.Webhooks[1].ClientConfig.CABundle, gotM.Webhooks[0].ClientConfig.CABundle} {
		if !bytes.Equal(b, s.Data["ca.crt"]) {
			t.Fatalf("a webhook's caBundle is %q, want the Secret's ca.crt", b)
		}
	}
	if gotV.Webhooks[0].FailurePolicy != nil {
		t.Fatal("failurePolicy set without --patch-failure-policy")
	}
}

func TestPatchFailurePolicyAndMissingConfiguration(t *testing.T) {
	vwc, _ := webhookConfigs()
	cs := fake.NewClientset(vwc)
	if err := run(t.Context(), createArgs, &bytes.Buffer{}, clientOf(cs)); err != nil {
		t.Fatal(err)
	}
	// No MutatingWebhookConfiguration: upstream fails too, and the Job
	// retries.
	err := run(t.Context(), append(patchArgs, "--patch-failure-policy=Ignore"), &bytes.Buffer{}, clientOf(cs))
	if err == nil || !strings.Contains(err.Error(), "patching MutatingWebhookConfiguration adm-paw") || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("err = %v, want the missing MutatingWebhookConfiguration named", err)
	}
	got, _ := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), "adm-paw", metav1.GetOptions{})
	if fp := got.Webhooks[1].FailurePolicy; fp == nil || *fp != admissionregistrationv1.Ignore {
		t.Fatalf("failurePolicy %v, want Ignore", fp)
	}
	if err := run(t.Context(), append(patchArgs, "--patch-mutating=false"), &bytes.Buffer{}, clientOf(cs)); err != nil {
		t.Fatalf("validating only: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	cs := fake.NewClientset()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage"},
		{[]string{"rotate"}, `unknown command "rotate"`},
		{[]string{"create", "--namespace=mon"}, "required flag(s) --host, --secret-name not set"},
		{[]string{"create", "--host=a", "--namespace=mon", "--secret-name=s", "extra"}, "unexpected arguments"},
		{[]string{"create", "--host=10.0.0.1", "--namespace=mon", "--secret-name=s"}, "IP address 10.0.0.1 is not supported"},
		{[]string{"create", "--host=a,,b", "--namespace=mon", "--secret-name=s"}, "empty name"},
		{[]string{"create", "--host=a", "--namespace=mon", "--secret-name=s", "--cert-name=x", "--key-name=x"}, "must differ"},
		{[]string{"create", "--host=a", "--namespace=mon", "--secret-name=s", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"patch", "--namespace=mon", "--secret-name=s"}, "--webhook-name not set"},
		{[]string{"patch", "--namespace=mon", "--secret-name=s", "--webhook-name=w", "--apiservice-name=x"}, "--apiservice-name is not supported"},
		{[]string{"patch", "--namespace=mon", "--secret-name=s", "--webhook-name=w", "--patch-mode=patch"}, `--patch-mode "patch" is not supported`},
		{[]string{"patch", "--namespace=mon", "--secret-name=s", "--webhook-name=w", "--patch-failure-policy=Sometimes"}, "not valid"},
		{[]string{"patch", "--namespace=mon", "--secret-name=s", "--webhook-name=w", "--patch-validating=false", "--patch-mutating=false"}, "nothing to patch"},
		{[]string{"patch", "--namespace=mon", "--secret-name=s", "--webhook-name=w", "--log-format=xml"}, "invalid --log-format"},
		{[]string{"patch", "--namespace=mon", "--secret-name=s", "--webhook-name=w"}, `getting the CA from Secret mon/s`},
	} {
		err := run(t.Context(), tc.args, &bytes.Buffer{}, clientOf(cs))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}
