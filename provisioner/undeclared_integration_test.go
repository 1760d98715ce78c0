package provisioner_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
	"github.com/rukpak-dev/rukpak/internal/testenv"
	"github.com/rukpak-dev/rukpak/internal/testregistry"
	"github.com/rukpak-dev/rukpak/provisioner/release"
)

// A registry+v1 bundle with the three shapes of undeclared fields that real
// bundles have and OLM's create/update accepts: a v1 CRD still carrying
// v1beta1's spec.version (openebs 3.0.0), a Deployment volume with
// defaultMode and secretName beside its name instead of under secret
// (multicluster-operators-subscription 0.4.1), and a custom resource (here
// a ServiceMonitor) with a field its CRD does not declare.
var undeclaredBundle = map[string]string{
	"metadata/annotations.yaml": `annotations:
  operators.operatorframework.io.bundle.channels.v1: stable
  operators.operatorframework.io.bundle.manifests.v1: manifests/
  operators.operatorframework.io.bundle.mediatype.v1: registry+v1
  operators.operatorframework.io.bundle.metadata.v1: metadata/
  operators.operatorframework.io.bundle.package.v1: undeclared-operator
`,
	"manifests/undeclared-operator.clusterserviceversion.yaml": `apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata: {name: undeclared-operator.v1.0.0}
spec:
  displayName: Undeclared Operator
  version: 1.0.0
  customresourcedefinitions:
    owned:
    - {name: cstorbackups.cstor.openebs.io, version: v1, kind: CStorBackup}
  installModes:
  - {type: AllNamespaces, supported: true}
  install:
    strategy: deployment
    spec:
      deployments:
      - name: operator
        spec:
          selector: {matchLabels: {app: operator}}
          template:
            metadata: {labels: {app: operator}}
            spec:
              serviceAccountName: operator
              containers: [{name: operator, image: example.com/operator:v1}]
              volumes:
              - name: klusterlet-config
                defaultMode: 420
                secretName: application-manager-hub-kubeconfig
`,
	"manifests/cstorbackups.crd.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: cstorbackups.cstor.openebs.io}
spec:
  group: cstor.openebs.io
  version: v1
  names: {kind: CStorBackup, listKind: CStorBackupList, plural: cstorbackups, singular: cstorbackup}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`,
	"manifests/operator-metrics.servicemonitor.yaml": `apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: operator-metrics}
spec:
  selector: {matchLabels: {app: operator}}
  endpoints:
  - port: metrics
    scrapeTimeoutSeconds: 10
`,
}

// serviceMonitorCRD is the Prometheus Operator's CRD, cut down to the
// fields the bundle uses correctly.
const serviceMonitorCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              selector:
                type: object
                properties:
                  matchLabels: {type: object, additionalProperties: {type: string}}
              endpoints:
                type: array
                items:
                  type: object
                  properties:
                    port: {type: string}
`

// TestIntegrationUndeclaredFieldsDoNotFailInstalls: the install succeeds
// without the undeclared fields, says so in one event per object, and the
// next reconcile (here by a restarted provisioner, which remembers nothing)
// finds nothing to write.
func TestIntegrationUndeclaredFieldsDoNotFailInstalls(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(serviceMonitorCRD), crd); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	h.reg.MustPush(t, h.reg.Ref("undeclared:v1"), testregistry.Image(t, testregistry.Layer(t, undeclaredBundle)))
	bd := newBD("undeclared", rukpakv1alpha1.BundleSource{
		Type:  rukpakv1alpha1.SourceTypeImage,
		Image: &rukpakv1alpha1.ImageSource{Ref: h.reg.Ref("undeclared:v1"), CertificateData: string(h.reg.CAPEM)},
	})
	bd.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	bd.Spec.Template.Spec.ProvisionerClassName = rukpakv1alpha1.ProvisionerClassRegistry
	if err := h.c.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	h.waitBD(bd.Name, rukpakv1alpha1.TypeInstalled, metav1.ConditionTrue, rukpakv1alpha1.ReasonInstallationSucceeded, "")

	const ns = "undeclared-operator-system"
	want := []string{
		"Dropped from CustomResourceDefinition cstorbackups.cstor.openebs.io the fields the API server's schema does not declare: spec.version",
		"Dropped from Deployment " + ns + "/operator the fields the API server's schema does not declare: spec.template.spec.volumes[0].defaultMode, spec.template.spec.volumes[0].secretName",
		"Dropped from ServiceMonitor " + ns + "/operator-metrics the fields the API server's schema does not declare: spec.endpoints[0].scrapeTimeoutSeconds",
	}
	eventually(t, "the events naming the dropped fields", func() error {
		if got := droppedEvents(t, h, bd.Name); !reflect.DeepEqual(got, want) {
			return fmt.Errorf("events %q", got)
		}
		return nil
	})
	for _, o := range []struct{ apiVersion, kind, namespace, name, field string }{
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "cstorbackups.cstor.openebs.io", "version"},
		{"monitoring.coreos.com/v1", "ServiceMonitor", ns, "operator-metrics", ""},
		{"apps/v1", "Deployment", ns, "operator", ""},
	} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(o.apiVersion)
		u.SetKind(o.kind)
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.name}, u); err != nil {
			t.Fatal(err)
		}
		if u.GetAnnotations()[release.AnnotationDroppedFields] == "" {
			t.Errorf("%s %s does not record its dropped fields: %v", o.kind, o.name, u.GetAnnotations())
		}
	}

	// A restarted provisioner reconciles every BundleDeployment: the
	// bundle's objects still have the undeclared fields, the cluster's do
	// not, and that is no drift.
	// With no kube-controller-manager the Deployment never becomes ready:
	// the status is complete once that is reported.
	h.waitBD(bd.Name, rukpakv1alpha1.TypeHealthy, metav1.ConditionFalse, rukpakv1alpha1.ReasonUnhealthy, "")
	h.kill()
	cfg, requests := testenv.RecordWrites(h.env.Config)
	h.env.Config = cfg
	before := h.successful("bundledeployment-" + rukpakv1alpha1.ProvisionerClassRegistry)
	h.start()
	eventually(t, "a reconcile by the restarted provisioner", func() error {
		if n := h.successful("bundledeployment-" + rukpakv1alpha1.ProvisionerClassRegistry); n <= before {
			return fmt.Errorf("%v successful reconciles, %v before the restart", n, before)
		}
		return nil
	})
	if sent := requests.Take(); len(sent) != 0 {
		t.Errorf("the second reconcile sent requests other than reads: %v", sent)
	}
	if got := droppedEvents(t, h, bd.Name); !reflect.DeepEqual(got, want) {
		t.Errorf("events after the second reconcile %q, want the install's only", got)
	}

	// Drift correction restores a deleted object as it was applied.
	dep := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: ns, Name: "operator"}
	if err := h.c.Get(ctx, key, dep); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(ctx, dep); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted Deployment to be restored", func() error {
		restored := &appsv1.Deployment{}
		if err := h.c.Get(ctx, key, restored); err != nil {
			return err
		}
		if restored.UID == dep.UID {
			return fmt.Errorf("not deleted yet")
		}
		if got := restored.Annotations[release.AnnotationDroppedFields]; got != `["spec.template.spec.volumes[0].defaultMode","spec.template.spec.volumes[0].secretName"]` {
			t.Errorf("restored Deployment records %q", got)
		}
		return nil
	})
}

// droppedEvents returns the notes of the events about dropped fields on the
// BundleDeployment name, sorted.
func droppedEvents(t *testing.T, h *harness, name string) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := h.c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "BundleDeployment" && e.Regarding.Name == name && e.Reason == "UndeclaredFieldsDropped" {
			if e.Type != "Warning" {
				t.Errorf("event %q has type %s", e.Note, e.Type)
			}
			if e.Related == nil {
				t.Errorf("event %q is not related to an object", e.Note)
			} else {
				// The note names the object the event is related to.
				rel := e.Related.Kind + " " + e.Related.Name
				if e.Related.Namespace != "" {
					rel = e.Related.Kind + " " + e.Related.Namespace + "/" + e.Related.Name
				}
				if !strings.HasPrefix(e.Note, "Dropped from "+rel+" the fields") {
					t.Errorf("event %q is related to %s", e.Note, rel)
				}
			}
			notes = append(notes, e.Note)
		}
	}
	sort.Strings(notes)
	return notes
}
