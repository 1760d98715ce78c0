package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/webhook"
)

// The seed's exact texts.
const (
	immutableMessage = `admission webhook "vbundles.core.rukpak.io" denied the request: bundle.spec is immutable`
	kubectlStderr    = `Error from server (bundle.spec is immutable): admission webhook "vbundles.core.rukpak.io" denied the request: bundle.spec is immutable`
)

func comboTagRef() *rukpakv1alpha1.Bundle {
	return &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "combo-tag-ref"},
		Spec: rukpakv1alpha1.BundleSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
			Source: rukpakv1alpha1.BundleSource{
				Type: rukpakv1alpha1.SourceTypeGit,
				Git: &rukpakv1alpha1.GitSource{
					Repository: "https://github.com/operator-framework/combo",
					Ref:        rukpakv1alpha1.GitRef{Tag: "v0.0.2"},
				},
			},
		},
	}
}

func imageBundle() *rukpakv1alpha1.Bundle {
	return &rukpakv1alpha1.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "image-ref"},
		Spec: rukpakv1alpha1.BundleSpec{
			ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
			Source: rukpakv1alpha1.BundleSource{
				Type:  rukpakv1alpha1.SourceTypeImage,
				Image: &rukpakv1alpha1.ImageSource{Ref: "quay.io/operator-framework/combo:v0.0.2"},
			},
		},
	}
}

// TestAdmission serves the real handlers (certificates from envtest, as in
// cert-manager mode) and drives them through the API server.
func TestAdmission(t *testing.T) {
	env := startEnv(t, "")
	stop := runWebhook(t, env, webhook.Config{
		CertMode:   webhook.CertModeCertManager,
		Server:     webhook.ServerOptions{CertDir: env.Env.WebhookInstallOptions.LocalServingCertDir},
		Delegation: webhook.Delegation{Default: &defaultSA},
	})
	ctx := context.Background()
	c := env.Client
	testenv.MustNotError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: defaultSA.Namespace}}), "creating namespace")
	testenv.MustNotError(t, c.Create(ctx, comboTagRef()), "creating combo-tag-ref")
	img := imageBundle()
	img.SetGroupVersionKind(rukpakv1alpha1.GroupVersion.WithKind("Bundle"))
	imgBody, err := json.Marshal(img)
	testenv.MustNotError(t, err, "encoding image-ref")
	testenv.MustNotError(t, c.Patch(ctx, img, client.RawPatch(types.ApplyPatchType, imgBody), client.FieldOwner("test")), "applying image-ref")

	t.Run("spec changes are denied", func(t *testing.T) { testSpecChangesDenied(t, c) })
	t.Run("metadata and status changes are allowed", func(t *testing.T) { testMetadataAllowed(t, c) })
	t.Run("kubectl patch prints the seed's error", func(t *testing.T) { testKubectlPatch(t, env) })
	t.Run("sources", func(t *testing.T) { testSources(t, c) })
	t.Run("bad requests", func(t *testing.T) { testBadRequests(t, env.Env.WebhookInstallOptions) })
	t.Run("access to referenced Secrets and ConfigMaps", func(t *testing.T) { testAccess(t, env) })
	t.Run("catalogs", func(t *testing.T) { testCatalogs(t, env) })
	t.Run("catalog sources only in templates", func(t *testing.T) { testCatalogSourceOnlyInTemplates(t, env) })
	t.Run("access to values sources", func(t *testing.T) { testValuesFrom(t, env) })
	t.Run("access to the ServiceAccount", func(t *testing.T) { testServiceAccount(t, env) })
	t.Run("delegation", func(t *testing.T) { testDelegation(t, env) })
	// Last: it stops the webhook.
	t.Run("metadata updates while the webhook is down", func(t *testing.T) { testWebhookDown(t, env, stop) })
}

type specChange struct {
	name   string
	bundle string
	merge  string
	json   string
	mutate func(*rukpakv1alpha1.BundleSpec)
}

var specChanges = []specChange{{
	name:   "git tag",
	bundle: "combo-tag-ref",
	merge:  `{"spec":{"source":{"git":{"ref":{"tag":"v0.0.3"}}}}}`,
	json:   `[{"op":"replace","path":"/spec/source/git/ref/tag","value":"v0.0.3"}]`,
	mutate: func(s *rukpakv1alpha1.BundleSpec) { s.Source.Git.Ref.Tag = "v0.0.3" },
}, {
	name:   "image ref",
	bundle: "image-ref",
	merge:  `{"spec":{"source":{"image":{"ref":"quay.io/operator-framework/combo:v0.0.3"}}}}`,
	json:   `[{"op":"replace","path":"/spec/source/image/ref","value":"quay.io/operator-framework/combo:v0.0.3"}]`,
	mutate: func(s *rukpakv1alpha1.BundleSpec) { s.Source.Image.Ref = "quay.io/operator-framework/combo:v0.0.3" },
}, {
	// image-ref was created by server-side apply, so an apply that drops
	// source.image really removes it and the request reaches the webhook.
	name:   "source type",
	bundle: "image-ref",
	merge:  `{"spec":{"source":{"type":"git","image":null,"git":{"repository":"https://github.com/operator-framework/combo","ref":{"tag":"v0.0.2"}}}}}`,
	json:   `[{"op":"replace","path":"/spec/source","value":{"type":"git","git":{"repository":"https://github.com/operator-framework/combo","ref":{"tag":"v0.0.2"}}}}]`,
	mutate: func(s *rukpakv1alpha1.BundleSpec) { s.Source = comboTagRef().Spec.Source },
}, {
	name:   "provisionerClassName",
	bundle: "combo-tag-ref",
	merge:  `{"spec":{"provisionerClassName":"core-rukpak-io-registry"}}`,
	json:   `[{"op":"replace","path":"/spec/provisionerClassName","value":"core-rukpak-io-registry"}]`,
	mutate: func(s *rukpakv1alpha1.BundleSpec) { s.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry },
}}

func testSpecChangesDenied(t *testing.T, c client.Client) {
	ctx := context.Background()
	for _, ch := range specChanges {
		key := types.NamespacedName{Name: ch.bundle}
		var before rukpakv1alpha1.Bundle
		testenv.MustNotError(t, c.Get(ctx, key, &before), "getting %s", ch.bundle)

		applied := before.Spec.DeepCopy()
		ch.mutate(applied)
		applyBody, err := json.Marshal(map[string]any{
			"apiVersion": rukpakv1alpha1.GroupVersion.String(), "kind": "Bundle",
			"metadata": map[string]any{"name": ch.bundle}, "spec": applied,
		})
		testenv.MustNotError(t, err, "encoding apply configuration")

		methods := []struct {
			name string
			do   func() error
		}{
			{"merge patch", func() error {
				return c.Patch(ctx, before.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(ch.merge)))
			}},
			{"json patch", func() error {
				return c.Patch(ctx, before.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(ch.json)))
			}},
			{"server-side apply", func() error {
				return c.Patch(ctx, before.DeepCopy(), client.RawPatch(types.ApplyPatchType, applyBody), client.FieldOwner("test"), client.ForceOwnership)
			}},
			{"full update", func() error {
				b := before.DeepCopy()
				ch.mutate(&b.Spec)
				return c.Update(ctx, b)
			}},
		}
		for _, m := range methods {
			t.Run(ch.name+"/"+m.name, func(t *testing.T) {
				err := m.do()
				if got := string(apierrors.ReasonForError(err)); got != webhook.SpecImmutable {
					t.Fatalf("reason = %q (error %v), want %q", got, err, webhook.SpecImmutable)
				}
				if err.Error() != immutableMessage {
					t.Fatalf("message = %q, want %q", err.Error(), immutableMessage)
				}
			})
		}

		// Custom resources do not support strategic merge patch: the API
		// server refuses it before admission, so it cannot change the spec
		// either.
		t.Run(ch.name+"/strategic merge patch", func(t *testing.T) {
			err := c.Patch(ctx, before.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, []byte(ch.merge)))
			if !apierrors.IsUnsupportedMediaType(err) {
				t.Fatalf("strategic merge patch: got %v, want 415 Unsupported Media Type", err)
			}
		})

		var after rukpakv1alpha1.Bundle
		testenv.MustNotError(t, c.Get(ctx, key, &after), "getting %s", ch.bundle)
		if after.Generation != before.Generation || after.Spec.Source.Type != before.Spec.Source.Type {
			t.Fatalf("%s changed despite the denials: generation %d -> %d", ch.bundle, before.Generation, after.Generation)
		}
	}
}

func testMetadataAllowed(t *testing.T, c client.Client) {
	ctx := context.Background()
	key := types.NamespacedName{Name: "combo-tag-ref"}
	get := func() *rukpakv1alpha1.Bundle {
		var b rukpakv1alpha1.Bundle
		testenv.MustNotError(t, c.Get(ctx, key, &b), "getting bundle")
		return &b
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"label (merge patch)", func() error {
			return c.Patch(ctx, get(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`)))
		}},
		{"annotation (json patch)", func() error {
			return c.Patch(ctx, get(), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/annotations","value":{"note":"x"}}]`)))
		}},
		{"finalizer added (update)", func() error {
			b := get()
			b.Finalizers = append(b.Finalizers, rukpakv1alpha1.FinalizerDeleteCachedBundle)
			return c.Update(ctx, b)
		}},
		{"owner reference (update)", func() error {
			b := get()
			b.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "0b8e5d4c-0000-4000-8000-000000000001"}}
			return c.Update(ctx, b)
		}},
		{"finalizer removed (update)", func() error {
			b := get()
			b.Finalizers = nil
			return c.Update(ctx, b)
		}},
		{"status (status subresource)", func() error {
			b := get()
			b.Status.Phase = rukpakv1alpha1.PhaseUnpacking
			return c.Status().Update(ctx, b)
		}},
		{"unchanged spec (server-side apply of labels)", func() error {
			body := `{"apiVersion":"core.rukpak.io/v1alpha1","kind":"Bundle","metadata":{"name":"combo-tag-ref","labels":{"applied":"yes"}}}`
			return c.Patch(ctx, get(), client.RawPatch(types.ApplyPatchType, []byte(body)), client.FieldOwner("test"))
		}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := s.do(); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		})
	}
	b := get()
	if b.Labels["team"] != "a" || b.Annotations["note"] != "x" || len(b.OwnerReferences) != 1 || b.Status.Phase != rukpakv1alpha1.PhaseUnpacking || b.Labels["applied"] != "yes" {
		t.Fatalf("metadata/status updates not persisted: %+v", b.ObjectMeta)
	}
}

func testKubectlPatch(t *testing.T, env *testenv.Env) {
	kubectl := testenv.Kubectl(t)
	user, err := env.Env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	testenv.MustNotError(t, err, "adding user")
	kubeconfig, err := user.KubeConfig()
	testenv.MustNotError(t, err, "building kubeconfig")
	path := filepath.Join(t.TempDir(), "kubeconfig")
	testenv.MustNotError(t, os.WriteFile(path, kubeconfig, 0o600), "writing kubeconfig")

	cmd := exec.Command(kubectl, "--kubeconfig", path, "patch", "bundle", "combo-tag-ref", "--type=merge",
		"-p", `{"spec":{"source":{"git":{"ref":{"tag":"v0.0.3"}}}}}`)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("kubectl patch succeeded, want it denied")
	}
	if got := strings.TrimSpace(stderr.String()); got != kubectlStderr {
		t.Fatalf("kubectl stderr:\n got %q\nwant %q", got, kubectlStderr)
	}
}

func testSources(t *testing.T, c client.Client) {
	ctx := context.Background()
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "mutable"}, Data: map[string]string{"a.yaml": "{}"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "frozen"}, Data: map[string]string{"a.yaml": "{}"}, Immutable: ptr.To(true)},
	} {
		testenv.MustNotError(t, c.Create(ctx, cm), "creating ConfigMap %s", cm.Name)
	}
	git := func(dir string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeGit, Git: &rukpakv1alpha1.GitSource{
			Repository: "https://example.com/repo.git", Directory: dir, Ref: rukpakv1alpha1.GitRef{Commit: "abcdef0"},
		}}
	}
	cms := func(name, path string) rukpakv1alpha1.BundleSource {
		return rukpakv1alpha1.BundleSource{Type: rukpakv1alpha1.SourceTypeConfigMaps, ConfigMaps: []rukpakv1alpha1.ConfigMapSource{
			{ConfigMap: rukpakv1alpha1.LocalObjectReference{Name: name}, Path: path},
		}}
	}
	// RukPak's refusals are its words exactly (the BundleDeployment's
	// template too: they are the words its Bundles would be refused with);
	// the others are this project's field errors.
	const rukpakDir = `bundle.spec.source.git.directory begins with "../": directory must define path within the repository`
	cases := []struct {
		name    string
		source  rukpakv1alpha1.BundleSource
		wantErr string // field path and problem, relative to the source
		rukpak  string // or RukPak's whole message
	}{
		{"git directory inside", git("manifests/../bundle"), "", ""},
		{"git directory dot-dot", git("bundle/../../etc"), "", rukpakDir},
		{"git directory absolute", git("/etc"), `source.git.directory: Invalid value: "/etc": must be a relative path inside the repository`, ""},
		{"configMaps path inside", cms("frozen", "manifests"), "", ""},
		{"configMaps path escaping", cms("frozen", "../x"), "", `bundle.spec.source.configmaps[0].path is invalid: "../x" is outside bundle root`},
		{"configMap mutable", cms("mutable", ""), "", `bundle.spec.source.configmaps[0].configmap.name is invalid: configmap "mutable" is not immutable`},
		{"configMap missing", cms("not-yet", ""), "", ""},
	}
	for i, tc := range cases {
		t.Run("Bundle/"+tc.name, func(t *testing.T) {
			b := &rukpakv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "src-" + strconv.Itoa(i)},
				Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: tc.source}}
			if tc.rukpak != "" {
				checkRukPakDenial(t, c.Create(ctx, b), webhook.BundleWebhookName, tc.rukpak)
				return
			}
			checkDenial(t, c.Create(ctx, b), webhook.BundleWebhookName, "spec."+tc.wantErr)
		})
		t.Run("BundleDeployment/"+tc.name, func(t *testing.T) {
			bd := &rukpakv1alpha1.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "src-" + strconv.Itoa(i)},
				Spec: rukpakv1alpha1.BundleDeploymentSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
					Template: rukpakv1alpha1.BundleTemplate{Spec: rukpakv1alpha1.BundleSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain, Source: tc.source}}}}
			if tc.rukpak != "" {
				checkRukPakDenial(t, c.Create(ctx, bd), webhook.BundleDeploymentWebhookName, tc.rukpak)
				return
			}
			checkDenial(t, c.Create(ctx, bd), webhook.BundleDeploymentWebhookName, "spec.template.spec."+tc.wantErr)
		})
	}

	t.Run("BundleDeployment template changed to a bad source", func(t *testing.T) {
		var bd rukpakv1alpha1.BundleDeployment
		testenv.MustNotError(t, c.Get(ctx, types.NamespacedName{Name: "src-0"}, &bd), "getting BundleDeployment")
		bd.Spec.Template.Spec.Source = git("../up")
		checkRukPakDenial(t, c.Update(ctx, &bd), webhook.BundleDeploymentWebhookName, rukpakDir)
	})
	t.Run("BundleDeployment metadata update with a since-mutated ConfigMap", func(t *testing.T) {
		// src-6 references the ConfigMap "not-yet"; create it mutable now.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: bundleNamespace, Name: "not-yet"}}
		testenv.MustNotError(t, c.Create(ctx, cm), "creating ConfigMap")
		var bd rukpakv1alpha1.BundleDeployment
		testenv.MustNotError(t, c.Get(ctx, types.NamespacedName{Name: "src-6"}, &bd), "getting BundleDeployment")
		bd.Labels = map[string]string{"touched": "yes"}
		testenv.MustNotError(t, c.Update(ctx, &bd), "updating labels of a BundleDeployment whose template is unchanged")
	})
}

// checkDenial asserts err is webhookName's denial containing want, or nil
// when want is only a field prefix (the case is valid).
func checkDenial(t *testing.T, err error, webhookName, want string) {
	t.Helper()
	if strings.HasSuffix(want, ".") {
		if err != nil {
			t.Fatalf("want admitted, got %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("want denied with %q, got admitted", want)
	}
	prefix := `admission webhook "` + webhookName + `" denied the request: `
	if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q\nwant prefix %q and %q", err.Error(), prefix, want)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("reason = %q, want Invalid", apierrors.ReasonForError(err))
	}
}

// checkRukPakDenial asserts err is webhookName's denial with RukPak's
// message exactly, rendered as RukPak's clients saw it: the message as the
// status reason, so kubectl prints
// Error from server (<message>): admission webhook "..." denied the request: <message>
func checkRukPakDenial(t *testing.T, err error, webhookName, message string) {
	t.Helper()
	want := `admission webhook "` + webhookName + `" denied the request: ` + message
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
	if reason := apierrors.ReasonForError(err); string(reason) != message {
		t.Fatalf("reason = %q, want the message %q", reason, message)
	}
}

// testWebhookDown stops the webhook server (the configuration still points
// at it, failurePolicy Fail): finalizers, labels and annotations of Bundles
// and BundleDeployments can still be changed, so deleted objects are not
// stuck, while spec changes and creations are still refused.
func testWebhookDown(t *testing.T, env *testenv.Env, stop func()) {
	ctx := context.Background()
	c := env.Client
	b := comboTagRef()
	b.Name = "finalized"
	b.Finalizers = []string{rukpakv1alpha1.FinalizerDeleteCachedBundle}
	testenv.MustNotError(t, c.Create(ctx, b), "creating Bundle")
	bd := &rukpakv1alpha1.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "finalized", Finalizers: []string{rukpakv1alpha1.FinalizerUninstall}},
		Spec: rukpakv1alpha1.BundleDeploymentSpec{ProvisionerClassName: rukpakv1alpha1.ProvisionerClassPlain,
			Template: rukpakv1alpha1.BundleTemplate{Spec: comboTagRef().Spec}},
	}
	testenv.MustNotError(t, c.Create(ctx, bd), "creating BundleDeployment")
	steered := bd.DeepCopy()
	steered.Name, steered.ResourceVersion, steered.UID = "steered", "", ""
	steered.Annotations = map[string]string{rukpakv1alpha1.AnnotationApprovedBundle: "steered-abcdef", rukpakv1alpha1.AnnotationCreatingBundle: "steered-abcdef"}
	steered.Labels = map[string]string{"core.rukpak.io/shard": "shard1"}
	testenv.MustNotError(t, c.Create(ctx, steered), "creating BundleDeployment")

	stop()
	wio := env.Env.WebhookInstallOptions
	addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("webhook server on %s still accepts connections", addr)
	}

	patch := func(obj client.Object, body string) error {
		return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(body)))
	}
	for _, obj := range []client.Object{&rukpakv1alpha1.Bundle{}, &rukpakv1alpha1.BundleDeployment{}} {
		obj.SetName("finalized")
		kind := fmt.Sprintf("%T", obj)
		t.Run(kind, func(t *testing.T) {
			testenv.MustNotError(t, patch(obj, `{"metadata":{"labels":{"while":"down"}}}`), "changing labels")
			testenv.MustNotError(t, c.Get(ctx, client.ObjectKeyFromObject(obj), obj), "getting")
			obj.SetAnnotations(map[string]string{"note": "update"})
			testenv.MustNotError(t, c.Update(ctx, obj), "changing annotations (update)")

			specPatch, name := `{"spec":{"source":{"git":{"ref":{"tag":"v0.0.3"}}}}}`, webhook.BundleWebhookName
			if _, ok := obj.(*rukpakv1alpha1.BundleDeployment); ok {
				specPatch, name = `{"spec":{"template":{"spec":{"source":{"git":{"ref":{"tag":"v0.0.3"}}}}}}}`, webhook.BundleDeploymentWebhookName
			}
			err := patch(obj, specPatch)
			if err == nil || !strings.Contains(err.Error(), `failed calling webhook "`+name+`"`) {
				t.Fatalf("spec patch with the webhook down: got %v, want the API server's failure to call the webhook", err)
			}

			testenv.MustNotError(t, c.Delete(ctx, obj), "deleting")
			testenv.MustNotError(t, patch(obj, `{"metadata":{"finalizers":null}}`), "removing the finalizer of a deleted object")
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				t.Fatalf("after removing its finalizer: got %v, want NotFound", err)
			}
		})
	}
	// The steering annotations and the shard label reach the webhook
	// (they take rights of their own); the rest of the metadata of the
	// same object still does not.
	t.Run("steering annotations", func(t *testing.T) {
		for _, body := range []string{
			`{"metadata":{"annotations":{"core.rukpak.io/approved-bundle":"steered-012345"}}}`,
			`{"metadata":{"annotations":{"core.rukpak.io/approved-bundle":null}}}`,
			`{"metadata":{"annotations":{"core.rukpak.io/skip-crd-upgrade-preflight":"true"}}}`,
			`{"metadata":{"annotations":{"core.rukpak.io/creating-bundle":"steered-012345"}}}`,
			`{"metadata":{"labels":{"core.rukpak.io/shard":"shard2"}}}`,
			`{"metadata":{"labels":{"core.rukpak.io/shard":null}}}`,
		} {
			err := patch(steered, body)
			if err == nil || !strings.Contains(err.Error(), `failed calling webhook "`+webhook.BundleDeploymentWebhookName+`"`) {
				t.Fatalf("%s with the webhook down: got %v, want the API server's failure to call the webhook", body, err)
			}
		}
		testenv.MustNotError(t, patch(steered, `{"metadata":{"labels":{"while":"down"},"annotations":{"core.rukpak.io/reconcile-requested-at":"1"}}}`), "changing other metadata")
		testenv.MustNotError(t, c.Delete(ctx, steered), "deleting")
		testenv.MustNotError(t, patch(steered, `{"metadata":{"finalizers":null}}`), "removing the finalizer of a deleted object")
		if err := c.Get(ctx, client.ObjectKeyFromObject(steered), steered); !apierrors.IsNotFound(err) {
			t.Fatalf("after removing its finalizer: got %v, want NotFound", err)
		}
	})
	t.Run("create", func(t *testing.T) {
		nb := comboTagRef()
		nb.Name = "created-while-down"
		if err := c.Create(ctx, nb); err == nil || !strings.Contains(err.Error(), `failed calling webhook "`+webhook.BundleWebhookName+`"`) {
			t.Fatalf("create with the webhook down: got %v, want the API server's failure to call the webhook", err)
		}
	})
}
