package registry

import (
	"reflect"
	"testing"
	"testing/fstest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/rukpak-dev/rukpak/provisioner/servingcert"
)

func hook(typ, name string, extra map[string]interface{}) map[string]interface{} {
	w := map[string]interface{}{
		"type": typ, "generateName": name, "deploymentName": "op",
		"containerPort": 443, "targetPort": 9443, "admissionReviewVersions": []interface{}{"v1"},
		"sideEffects": "None", "webhookPath": "/" + name,
	}
	if typ != webhookConversion {
		w["rules"] = []interface{}{map[string]interface{}{
			"apiGroups": []interface{}{"example.com"}, "apiVersions": []interface{}{"v1"},
			"operations": []interface{}{"CREATE"}, "resources": []interface{}{"foos"},
		}}
	}
	for k, v := range extra {
		w[k] = v
	}
	return w
}

func webhookCSV(modes []string, hooks ...map[string]interface{}) map[string]interface{} {
	csv := testCSV(modes...)
	defs := make([]interface{}, len(hooks))
	for i, h := range hooks {
		defs[i] = h
	}
	csv["spec"].(map[string]interface{})["webhookdefinitions"] = defs
	return csv
}

func TestWebhookDefinitionsRefused(t *testing.T) {
	all := []string{InstallModeAllNamespaces}
	rules := func(group, resource string) map[string]interface{} {
		return map[string]interface{}{"rules": []interface{}{map[string]interface{}{
			"apiGroups": []interface{}{group}, "apiVersions": []interface{}{"*"}, "operations": []interface{}{"*"}, "resources": []interface{}{resource},
		}}}
	}
	tests := []struct {
		name string
		csv  map[string]interface{}
		crd  string // replaces the test CRD
		want string
	}{
		{
			name: "unknown type",
			csv:  webhookCSV(all, hook("Admission", "v.example.com", nil)),
			want: `spec.webhookdefinitions[0] ("v.example.com"): unknown type "Admission"; known types are ValidatingAdmissionWebhook, MutatingAdmissionWebhook, ConversionWebhook`,
		},
		{
			name: "invalid name",
			csv:  webhookCSV(all, hook(webhookValidating, "V_bad", nil)),
			want: `spec.webhookdefinitions[0] ("V_bad"): generateName is not a valid object name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		{
			name: "duplicate",
			csv:  webhookCSV(all, hook(webhookValidating, "v.example.com", nil), hook(webhookValidating, "v.example.com", nil)),
			want: `spec.webhookdefinitions[1] ("v.example.com"): a ValidatingAdmissionWebhook named "v.example.com" is defined more than once`,
		},
		{
			name: "unknown deployment",
			csv:  webhookCSV(all, hook(webhookValidating, "v.example.com", map[string]interface{}{"deploymentName": "nope"})),
			want: `spec.webhookdefinitions[0] ("v.example.com"): deploymentName "nope" names no deployment of spec.install.spec.deployments`,
		},
		{
			name: "all groups",
			csv:  webhookCSV(all, hook(webhookValidating, "v.example.com", rules("*", "*"))),
			want: `spec.webhookdefinitions[0] ("v.example.com"): admission webhook rules cannot reference API group "*"`,
		},
		{
			name: "rukpak's group",
			csv:  webhookCSV(all, hook(webhookMutating, "m.example.com", rules("core.rukpak.io", "bundledeployments"))),
			want: `spec.webhookdefinitions[0] ("m.example.com"): admission webhook rules cannot reference API group "core.rukpak.io"`,
		},
		{
			name: "OLM's group",
			csv:  webhookCSV(all, hook(webhookValidating, "v.example.com", rules("olm.operatorframework.io", "clusterextensions"))),
			want: `spec.webhookdefinitions[0] ("v.example.com"): admission webhook rules cannot reference API group "olm.operatorframework.io"`,
		},
		{
			name: "webhook configurations",
			csv:  webhookCSV(all, hook(webhookValidating, "v.example.com", rules("admissionregistration.k8s.io", "ValidatingWebhookConfigurations"))),
			want: `spec.webhookdefinitions[0] ("v.example.com"): admission webhook rules cannot reference resource "ValidatingWebhookConfigurations" of API group "admissionregistration.k8s.io"`,
		},
		{
			name: "no review versions",
			csv:  webhookCSV(all, hook(webhookValidating, "v.example.com", map[string]interface{}{"admissionReviewVersions": nil})),
			want: `spec.webhookdefinitions[0] ("v.example.com"): admissionReviewVersions is empty`,
		},
		{
			name: "conversion without only AllNamespaces",
			csv: webhookCSV([]string{InstallModeOwnNamespace, InstallModeAllNamespaces},
				hook(webhookConversion, "c.example.com", map[string]interface{}{"conversionCRDs": []interface{}{"foos.example.com"}})),
			want: `spec.webhookdefinitions[0] ("c.example.com"): CSVs with conversion webhooks must support only AllNamespaces install mode (supported install modes: OwnNamespace, AllNamespaces)`,
		},
		{
			name: "conversion without CRDs",
			csv:  webhookCSV(all, hook(webhookConversion, "c.example.com", nil)),
			want: `spec.webhookdefinitions[0] ("c.example.com"): a conversion webhook must list at least one CRD in conversionCRDs`,
		},
		{
			name: "conversion of a CRD not owned",
			csv:  webhookCSV(all, hook(webhookConversion, "c.example.com", map[string]interface{}{"conversionCRDs": []interface{}{"bars.example.com"}})),
			want: `spec.webhookdefinitions[0] ("c.example.com"): conversionCRDs names "bars.example.com", which is not a CustomResourceDefinition the bundle owns`,
		},
		{
			name: "CRD converted twice",
			csv: webhookCSV(all,
				hook(webhookConversion, "c.example.com", map[string]interface{}{"conversionCRDs": []interface{}{"foos.example.com"}}),
				hook(webhookConversion, "d.example.com", map[string]interface{}{"conversionCRDs": []interface{}{"foos.example.com"}})),
			want: `spec.webhookdefinitions[1] ("d.example.com"): CustomResourceDefinition "foos.example.com" is already converted by webhook "c.example.com"`,
		},
		{
			name: "conversion of a CRD preserving unknown fields",
			csv:  webhookCSV(all, hook(webhookConversion, "c.example.com", map[string]interface{}{"conversionCRDs": []interface{}{"foos.example.com"}})),
			crd:  testCRD + "  preserveUnknownFields: true\n",
			want: `spec.webhookdefinitions[0] ("c.example.com"): CustomResourceDefinition "foos.example.com" must set spec.preserveUnknownFields to false for the API server to call a conversion webhook`,
		},
		{
			name: "one port, two targets",
			csv: webhookCSV(all, hook(webhookValidating, "v.example.com", nil),
				hook(webhookMutating, "m.example.com", map[string]interface{}{"targetPort": "https"})),
			want: `webhooks and API services of deployment "op" send port 443 to both target port 9443 and https`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := testBundle(t, tc.csv)
			if tc.crd != "" {
				fsys["manifests/foos.crd.yaml"] = &fstest.MapFile{Data: []byte(tc.crd)}
			}
			_, err := Convert(fsys, Options{})
			want := `ClusterServiceVersion "op.v1.0.0": ` + tc.want
			if tc.name == "one port, two targets" {
				want = tc.want
			}
			if err == nil || err.Error() != want {
				t.Fatalf("got %v\nwant %s", err, want)
			}
		})
	}
}

func TestWebhookObjects(t *testing.T) {
	csv := webhookCSV([]string{InstallModeAllNamespaces},
		hook(webhookValidating, "v.example.com", map[string]interface{}{"failurePolicy": "Fail", "timeoutSeconds": 7,
			"objectSelector": map[string]interface{}{"matchLabels": map[string]interface{}{"x": "y"}}}),
		hook(webhookMutating, "m.example.com-", map[string]interface{}{"reinvocationPolicy": "IfNeeded", "matchPolicy": "Equivalent"}),
		hook(webhookConversion, "c.example.com", map[string]interface{}{"conversionCRDs": []interface{}{"foos.example.com"}, "webhookPath": nil}),
	)
	// The operator's own certificate volume, at the path the provisioner
	// mounts its certificate, is replaced.
	dep := csv["spec"].(map[string]interface{})["install"].(map[string]interface{})["spec"].(map[string]interface{})["deployments"].([]interface{})[0].(map[string]interface{})
	podSpec := dep["spec"].(map[string]interface{})["template"].(map[string]interface{})["spec"].(map[string]interface{})
	podSpec["volumes"] = []interface{}{
		map[string]interface{}{"name": "certs", "secret": map[string]interface{}{"secretName": "own"}},
		map[string]interface{}{"name": "data", "emptyDir": map[string]interface{}{}},
	}
	podSpec["containers"].([]interface{})[0].(map[string]interface{})["volumeMounts"] = []interface{}{
		map[string]interface{}{"name": "certs", "mountPath": "/tmp/k8s-webhook-server/serving-certs"},
		map[string]interface{}{"name": "data", "mountPath": "/data"},
	}
	fsys := testBundle(t, csv)
	// A bundled Service under the generated name is replaced, as OLM v0 does.
	fsys["manifests/svc.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v1\nkind: Service\nmetadata: {name: op-service}\nspec: {ports: [{port: 1}]}\n")}
	out, err := Convert(fsys, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := summary(t, out)
	want := []string{
		"Namespace /op-system", "CustomResourceDefinition /foos.example.com", "ServiceAccount op-system/op-sa",
		"ClusterRole /op.v1.0.0-op-sa", "ClusterRoleBinding /op.v1.0.0-op-sa",
		"ClusterRole /op.v1.0.0-op-sa-cluster", "ClusterRoleBinding /op.v1.0.0-op-sa-cluster",
		"Deployment op-system/op",
		"Secret op-system/op-service-cert", "Service op-system/op-service",
		"ValidatingWebhookConfiguration /v.example.com", "MutatingWebhookConfiguration /m.example.com",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("objects:\n got %q\nwant %q", got, want)
	}
	const caFrom = "op-system/op-service-cert"
	expect := map[string]string{
		"Secret/op-system/op-service-cert": `apiVersion: v1
kind: Secret
metadata:
  annotations:
    core.rukpak.io/serving-certificate-dns-names: op-service.op-system.svc,op-service.op-system.svc.cluster.local
  name: op-service-cert
  namespace: op-system
type: kubernetes.io/tls
`,
		"Service/op-system/op-service": `apiVersion: v1
kind: Service
metadata:
  name: op-service
  namespace: op-system
spec:
  ports:
  - name: "443"
    port: 443
    targetPort: 9443
  selector:
    app: op
`,
		"ValidatingWebhookConfiguration//v.example.com": `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  annotations:
    core.rukpak.io/inject-ca-from: op-system/op-service-cert
  name: v.example.com
webhooks:
- admissionReviewVersions:
  - v1
  clientConfig:
    service:
      name: op-service
      namespace: op-system
      path: /v.example.com
      port: 443
  failurePolicy: Fail
  name: v.example.com
  objectSelector:
    matchLabels:
      x: "y"
  rules:
  - apiGroups:
    - example.com
    apiVersions:
    - v1
    operations:
    - CREATE
    resources:
    - foos
  sideEffects: None
  timeoutSeconds: 7
`,
		"MutatingWebhookConfiguration//m.example.com": `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  annotations:
    core.rukpak.io/inject-ca-from: op-system/op-service-cert
  name: m.example.com
webhooks:
- admissionReviewVersions:
  - v1
  clientConfig:
    service:
      name: op-service
      namespace: op-system
      path: /m.example.com-
      port: 443
  matchPolicy: Equivalent
  name: m.example.com
  reinvocationPolicy: IfNeeded
  rules:
  - apiGroups:
    - example.com
    apiVersions:
    - v1
    operations:
    - CREATE
    resources:
    - foos
  sideEffects: None
`,
	}
	for key, wantYAML := range expect {
		var o *unstructured.Unstructured
		switch key {
		case "Secret/op-system/op-service-cert":
			o = find(t, out, "Secret", "op-system", "op-service-cert")
		case "Service/op-system/op-service":
			o = find(t, out, "Service", "op-system", "op-service")
		case "ValidatingWebhookConfiguration//v.example.com":
			o = find(t, out, "ValidatingWebhookConfiguration", "", "v.example.com")
		default:
			o = find(t, out, "MutatingWebhookConfiguration", "", "m.example.com")
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != wantYAML {
			t.Errorf("%s:\n%s\nwant:\n%s", key, b, wantYAML)
		}
	}

	crd := find(t, out, "CustomResourceDefinition", "", "foos.example.com")
	if crd.GetAnnotations()[servingcert.AnnotationInjectCAFrom] != caFrom {
		t.Errorf("CRD annotations %v, want %s=%s", crd.GetAnnotations(), servingcert.AnnotationInjectCAFrom, caFrom)
	}
	conv, _, _ := unstructured.NestedMap(crd.Object, "spec", "conversion")
	wantConv := map[string]interface{}{"strategy": "Webhook", "webhook": map[string]interface{}{
		"clientConfig":             map[string]interface{}{"service": map[string]interface{}{"namespace": "op-system", "name": "op-service", "path": "/", "port": int64(443)}},
		"conversionReviewVersions": []interface{}{"v1"},
	}}
	if !reflect.DeepEqual(conv, wantConv) {
		t.Errorf("CRD spec.conversion = %v, want %v", conv, wantConv)
	}

	d := find(t, out, "Deployment", "op-system", "op")
	vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	b, _ := yaml.Marshal(vols)
	if want := `- emptyDir: {}
  name: data
- name: webhook-cert
  secret:
    items:
    - key: tls.crt
      path: tls.crt
    - key: tls.key
      path: tls.key
    secretName: op-service-cert
- name: apiservice-cert
  secret:
    items:
    - key: tls.crt
      path: apiserver.crt
    - key: tls.key
      path: apiserver.key
    secretName: op-service-cert
`; string(b) != want {
		t.Errorf("volumes:\n%s\nwant:\n%s", b, want)
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	b, _ = yaml.Marshal(containers[0].(map[string]interface{})["volumeMounts"])
	if want := `- mountPath: /data
  name: data
- mountPath: /tmp/k8s-webhook-server/serving-certs
  name: webhook-cert
- mountPath: /apiserver.local.config/certificates
  name: apiservice-cert
`; string(b) != want {
		t.Errorf("volume mounts:\n%s\nwant:\n%s", b, want)
	}
}

// In OwnNamespace, SingleNamespace and MultiNamespace modes admission
// webhooks see only the watched namespaces.
func TestWebhookNamespaceSelector(t *testing.T) {
	csv := webhookCSV(installModeOrder, hook(webhookValidating, "v.example.com", nil))
	for _, tc := range []struct {
		watch []string
		want  interface{}
	}{
		{nil, nil},
		{[]string{"op-system"}, []interface{}{"op-system"}},
		{[]string{"apps"}, []interface{}{"apps"}},
		{[]string{"b", "a"}, []interface{}{"b", "a"}},
	} {
		out, err := Convert(testBundle(t, csv), Options{WatchNamespaces: tc.watch})
		if err != nil {
			t.Fatal(err)
		}
		v := find(t, out, "ValidatingWebhookConfiguration", "", "v.example.com")
		hooks, _, _ := unstructured.NestedSlice(v.Object, "webhooks")
		sel, found, _ := unstructured.NestedSlice(hooks[0].(map[string]interface{}), "namespaceSelector", "matchExpressions")
		if tc.want == nil {
			if found {
				t.Errorf("watch %q: namespaceSelector %v, want none", tc.watch, sel)
			}
			continue
		}
		want := []interface{}{map[string]interface{}{"key": "kubernetes.io/metadata.name", "operator": "In", "values": tc.want}}
		if !reflect.DeepEqual(sel, want) {
			t.Errorf("watch %q: namespaceSelector %v, want %v", tc.watch, sel, want)
		}
	}
}

// With spec.config.certificateProvider cert-manager, a self-signed Issuer
// and a Certificate issue the serving certificate into the same Secret, and
// cert-manager's cainjector injects the CA, as OLM v1 does.
func TestWebhookCertManager(t *testing.T) {
	csv := webhookCSV([]string{InstallModeAllNamespaces}, hook(webhookValidating, "v.example.com", nil),
		hook(webhookConversion, "c.example.com", map[string]interface{}{"conversionCRDs": []interface{}{"foos.example.com"}}))
	out, err := Convert(testBundle(t, csv), Options{CertificateProvider: CertProviderCertManager})
	if err != nil {
		t.Fatal(err)
	}
	got := summary(t, out)
	want := []string{
		"Namespace /op-system", "CustomResourceDefinition /foos.example.com", "ServiceAccount op-system/op-sa",
		"ClusterRole /op.v1.0.0-op-sa", "ClusterRoleBinding /op.v1.0.0-op-sa",
		"ClusterRole /op.v1.0.0-op-sa-cluster", "ClusterRoleBinding /op.v1.0.0-op-sa-cluster",
		"Deployment op-system/op",
		"Issuer op-system/op-service-cert-selfsigned-issuer", "Certificate op-system/op-service-cert", "Service op-system/op-service",
		"ValidatingWebhookConfiguration /v.example.com",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("objects:\n got %q\nwant %q", got, want)
	}
	b, _ := yaml.Marshal(find(t, out, "Certificate", "op-system", "op-service-cert").Object)
	if want := `apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: op-service-cert
  namespace: op-system
spec:
  dnsNames:
  - op-service.op-system.svc
  - op-service.op-system.svc.cluster.local
  issuerRef:
    name: op-service-cert-selfsigned-issuer
  secretName: op-service-cert
  usages:
  - server auth
`; string(b) != want {
		t.Errorf("Certificate:\n%s\nwant:\n%s", b, want)
	}
	for _, o := range []*unstructured.Unstructured{
		find(t, out, "ValidatingWebhookConfiguration", "", "v.example.com"),
		find(t, out, "CustomResourceDefinition", "", "foos.example.com"),
	} {
		if a := o.GetAnnotations(); len(a) != 1 || a["cert-manager.io/inject-ca-from"] != "op-system/op-service-cert" {
			t.Errorf("%s annotations %v, want only cert-manager.io/inject-ca-from: op-system/op-service-cert", o.GetKind(), a)
		}
	}

	_, err = Convert(testBundle(t, csv), Options{CertificateProvider: "vault"})
	if want := `spec.config.certificateProvider "vault" is not a certificate provider: use "rukpak" (the default) or "cert-manager"`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// TestWebhookTargetPort: the Service sends a webhook's port to its
// targetPort; 0 and "" (ndb-operator 1.10.0 ships targetPort: 0) mean the
// port itself, as the API server defaults the Service OLM copies them into.
func TestWebhookTargetPort(t *testing.T) {
	tests := []struct {
		name   string
		target interface{} // nil: unset
		want   interface{}
	}{
		{"unset", nil, int64(443)},
		{"zero", 0, int64(443)},
		{"empty name", "", int64(443)},
		{"number", 9443, int64(9443)},
		{"name", "https", "https"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := hook(webhookValidating, "v.example.com", nil)
			delete(h, "targetPort")
			if tc.target != nil {
				h["targetPort"] = tc.target
			}
			out, err := Convert(testBundle(t, webhookCSV([]string{InstallModeAllNamespaces}, h)), Options{})
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			ports, _, _ := unstructured.NestedSlice(find(t, out, "Service", "op-system", "op-service").Object, "spec", "ports")
			if len(ports) != 1 {
				t.Fatalf("ports %v, want one", ports)
			}
			if got := ports[0].(map[string]interface{})["targetPort"]; !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("targetPort %#v, want %#v", got, tc.want)
			}
		})
	}
}
