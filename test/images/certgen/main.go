// Command certgen is the test image of the hook Jobs that charts run to
// give their admission webhook a serving certificate: it implements the
// command line of kube-webhook-certgen (ingress-nginx's, as published at
// ghcr.io/jkroepke/kube-webhook-certgen, which the chart
// prometheus-operator-admission-webhook and many others invoke), because
// that program's source cannot be fetched here: the module proxy refuses
// github.com/jkroepke/kube-webhook-certgen (403) and does not hold
// ingress-nginx's nested module images/kube-webhook-certgen/rootfs (404),
// and the one version it serves of the original, github.com/jet/
// kube-webhook-certgen v1.5.2, patches admissionregistration.k8s.io/v1beta1,
// which API servers no longer serve.
//
//	certgen create --host=a,b --namespace=NS --secret-name=S [--cert-name=cert] [--key-name=key] [--secret-type=Opaque]
//	certgen patch --namespace=NS --secret-name=S --webhook-name=W [--patch-validating=true] [--patch-mutating=true] [--patch-failure-policy=Ignore|Fail]
//
// create makes a CA and a serving certificate for the hosts and stores
// them in a new Secret (keys ca.crt, cert-name and key-name); a Secret
// that exists already is left as it is, as upstream does, so a pre-upgrade
// hook keeps the certificate. patch copies the Secret's ca.crt into the
// caBundle of every webhook of the ValidatingWebhookConfiguration and the
// MutatingWebhookConfiguration named --webhook-name (either may be turned
// off), optionally setting their failurePolicy. Both authenticate with
// the pod's ServiceAccount (or --kubeconfig) and exit 1 with the reason
// on any error, so a Job's restartPolicy retries them. Flags upstream has
// that no chart here uses (--apiservice-name, --patch-mode=patch) are
// refused by name rather than ignored. Built by internal/nodeimages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/rukpak-dev/rukpak/provisioner/servingcert"
)

// caKey is where create stores the CA and patch reads it, whatever
// --ca-name says: upstream reads ca.crt too.
const caKey = servingcert.CAFile

// validity of the certificates create issues: upstream's is 100 years;
// a year is plenty for a test and keeps servingcert's checks meaningful.
const validity = 365 * 24 * time.Hour

// newClient builds the API client; tests replace it.
type newClient func(kubeconfig string) (kubernetes.Interface, error)

func main() {
	if err := signalled(); err != nil {
		slog.Error(err.Error())
		os.Exit(1)
	}
}

// signalled runs the command until it ends or the pod is stopped.
func signalled() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return run(ctx, os.Args[1:], os.Stderr, inCluster)
}

// inCluster uses the kubeconfig when given, else the pod's ServiceAccount.
func inCluster(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("building the client configuration: %w", err)
	}
	cfg.UserAgent = "kube-webhook-certgen (rukpak test image)"
	return kubernetes.NewForConfig(cfg)
}

// globals are upstream's persistent flags.
type globals struct {
	logLevel, logFormat, kubeconfig string
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.logLevel, "log-level", "info", "Log level: debug|info|warn|error")
	fs.StringVar(&g.logFormat, "log-format", "json", "Log format: text|json")
	fs.StringVar(&g.kubeconfig, "kubeconfig", "", "Path to a kubeconfig (default: the pod's ServiceAccount)")
}

func (g *globals) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("invalid --log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch g.logFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("invalid --log-format %q (text or json)", g.logFormat)
}

func run(ctx context.Context, args []string, stderr io.Writer, client newClient) error {
	if len(args) == 0 {
		return errors.New("usage: certgen create|patch [flags]")
	}
	var g globals
	fs := flag.NewFlagSet("certgen "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	g.register(fs)
	switch args[0] {
	case "create":
		var c createOpts
		c.register(fs)
		if err := parse(fs, args[1:], "host", "namespace", "secret-name"); err != nil {
			return err
		}
		log, err := g.logger(stderr)
		if err != nil {
			return err
		}
		cs, err := client(g.kubeconfig)
		if err != nil {
			return err
		}
		return c.run(ctx, log, cs)
	case "patch":
		var p patchOpts
		p.register(fs)
		if err := parse(fs, args[1:], "namespace", "secret-name"); err != nil {
			return err
		}
		log, err := g.logger(stderr)
		if err != nil {
			return err
		}
		if err := p.validate(); err != nil {
			return err
		}
		cs, err := client(g.kubeconfig)
		if err != nil {
			return err
		}
		return p.run(ctx, log, cs)
	}
	return fmt.Errorf("unknown command %q: certgen create|patch [flags]", args[0])
}

// parse parses flags, refusing positional arguments and missing required
// flags by name.
func parse(fs *flag.FlagSet, args []string, required ...string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	var missing []string
	for _, name := range required {
		if fs.Lookup(name).Value.String() == "" {
			missing = append(missing, "--"+name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: required flag(s) %s not set", fs.Name(), strings.Join(missing, ", "))
	}
	return nil
}

type createOpts struct {
	host, namespace, secretName, secretType, caName, certName, keyName string
}

func (c *createOpts) register(fs *flag.FlagSet) {
	fs.StringVar(&c.host, "host", "", "Comma-separated host names to generate a certificate for")
	fs.StringVar(&c.namespace, "namespace", "", "Namespace of the Secret")
	fs.StringVar(&c.secretName, "secret-name", "", "Name of the Secret the certificate is written to")
	fs.StringVar(&c.secretType, "secret-type", string(corev1.SecretTypeOpaque), "Type of the Secret")
	fs.StringVar(&c.caName, "ca-name", "ca", "Accepted for compatibility; the CA is stored as ca.crt, as upstream reads it")
	fs.StringVar(&c.certName, "cert-name", "cert", "Key of the certificate in the Secret")
	fs.StringVar(&c.keyName, "key-name", "key", "Key of the private key in the Secret")
}

// hosts are --host's names; IP addresses are refused (servingcert issues
// DNS names only, and no chart here asks for one).
func (c *createOpts) hosts() ([]string, error) {
	var out []string
	for _, h := range strings.Split(c.host, ",") {
		h = strings.TrimSpace(h)
		switch {
		case h == "":
			return nil, fmt.Errorf("--host %q has an empty name", c.host)
		case net.ParseIP(h) != nil:
			return nil, fmt.Errorf("--host %q: IP address %s is not supported by this test image", c.host, h)
		}
		out = append(out, h)
	}
	return out, nil
}

func (c *createOpts) run(ctx context.Context, log *slog.Logger, cs kubernetes.Interface) error {
	hosts, err := c.hosts()
	if err != nil {
		return err
	}
	if c.certName == c.keyName || c.certName == caKey || c.keyName == caKey {
		return fmt.Errorf("--cert-name %q, --key-name %q and %q must differ", c.certName, c.keyName, caKey)
	}
	secrets := cs.CoreV1().Secrets(c.namespace)
	_, err = secrets.Get(ctx, c.secretName, metav1.GetOptions{})
	switch {
	case err == nil:
		log.Info("secret already exists", "secret", c.secretName, "namespace", c.namespace)
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("getting Secret %s/%s: %w", c.namespace, c.secretName, err)
	}
	issued, err := servingcert.Issue(time.Now(), hosts, validity, nil)
	if err != nil {
		return fmt.Errorf("issuing the certificate: %w", err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: c.secretName, Namespace: c.namespace},
		Type:       corev1.SecretType(c.secretType),
		Data: map[string][]byte{
			caKey:      issued[servingcert.CAFile],
			c.certName: issued[servingcert.CertFile],
			c.keyName:  issued[servingcert.KeyFile],
		},
	}
	if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Secret %s/%s: %w", c.namespace, c.secretName, err)
	}
	log.Info("created secret", "secret", c.secretName, "namespace", c.namespace, "hosts", hosts)
	return nil
}

type patchOpts struct {
	namespace, secretName, secretType, webhookName string
	apiServiceName, patchMode, failurePolicy       string
	validating, mutating                           bool
}

func (p *patchOpts) register(fs *flag.FlagSet) {
	fs.StringVar(&p.namespace, "namespace", "", "Namespace of the Secret")
	fs.StringVar(&p.secretName, "secret-name", "", "Name of the Secret holding ca.crt")
	fs.StringVar(&p.secretType, "secret-type", "", "Accepted for compatibility")
	fs.StringVar(&p.webhookName, "webhook-name", "", "Name of the Validating- and MutatingWebhookConfiguration to patch")
	fs.StringVar(&p.apiServiceName, "apiservice-name", "", "Not supported by this test image")
	fs.StringVar(&p.patchMode, "patch-mode", "update", "update (the only mode this test image supports)")
	fs.StringVar(&p.failurePolicy, "patch-failure-policy", "", "If set (Ignore or Fail), also set the webhooks' failurePolicy")
	fs.BoolVar(&p.validating, "patch-validating", true, "Patch the ValidatingWebhookConfiguration")
	fs.BoolVar(&p.mutating, "patch-mutating", true, "Patch the MutatingWebhookConfiguration")
}

func (p *patchOpts) validate() error {
	switch {
	case p.apiServiceName != "":
		return errors.New("--apiservice-name is not supported by this test image")
	case p.patchMode != "update":
		return fmt.Errorf("--patch-mode %q is not supported by this test image (update only)", p.patchMode)
	case p.failurePolicy != "" && p.failurePolicy != string(admissionregistrationv1.Ignore) && p.failurePolicy != string(admissionregistrationv1.Fail):
		return fmt.Errorf("--patch-failure-policy %q is not valid (Ignore or Fail)", p.failurePolicy)
	case !p.validating && !p.mutating:
		return errors.New("patch-validating=false, patch-mutating=false: nothing to patch")
	case p.webhookName == "":
		return errors.New("patch: required flag --webhook-name not set")
	}
	return nil
}

func (p *patchOpts) run(ctx context.Context, log *slog.Logger, cs kubernetes.Interface) error {
	secret, err := cs.CoreV1().Secrets(p.namespace).Get(ctx, p.secretName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("getting the CA from Secret %s/%s: %w", p.namespace, p.secretName, err)
	}
	ca := secret.Data[caKey]
	if len(ca) == 0 {
		return fmt.Errorf("secret %s/%s has no %s", p.namespace, p.secretName, caKey)
	}
	var policy *admissionregistrationv1.FailurePolicyType
	if p.failurePolicy != "" {
		fp := admissionregistrationv1.FailurePolicyType(p.failurePolicy)
		policy = &fp
	}
	setAll := func(cc *admissionregistrationv1.WebhookClientConfig, fp **admissionregistrationv1.FailurePolicyType) {
		cc.CABundle = ca
		if policy != nil {
			*fp = policy
		}
	}
	if p.validating {
		vwcs := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
		err := updateRetrying(ctx, p.webhookName, vwcs.Get, vwcs.Update, func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			for i := range c.Webhooks {
				setAll(&c.Webhooks[i].ClientConfig, &c.Webhooks[i].FailurePolicy)
			}
		})
		if err != nil {
			return fmt.Errorf("patching ValidatingWebhookConfiguration %s: %w", p.webhookName, err)
		}
		log.Info("patched validating webhook configuration", "name", p.webhookName)
	}
	if p.mutating {
		mwcs := cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
		err := updateRetrying(ctx, p.webhookName, mwcs.Get, mwcs.Update, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			for i := range c.Webhooks {
				setAll(&c.Webhooks[i].ClientConfig, &c.Webhooks[i].FailurePolicy)
			}
		})
		if err != nil {
			return fmt.Errorf("patching MutatingWebhookConfiguration %s: %w", p.webhookName, err)
		}
		log.Info("patched mutating webhook configuration", "name", p.webhookName)
	}
	return nil
}

// updateRetrying gets the object name, edits it and updates it, again from
// the get when someone else updated it in between.
func updateRetrying[T any](ctx context.Context, name string,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error),
	edit func(T),
) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(obj)
		_, err = update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
}
