package registry

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// apiServiceDescription is one entry of spec.apiservicedefinitions.owned
// (OLM's v1alpha1.APIServiceDescription), the fields installing needs.
type apiServiceDescription struct {
	Name           string `json:"name,omitempty"`
	Group          string `json:"group"`
	Version        string `json:"version"`
	Kind           string `json:"kind,omitempty"`
	DeploymentName string `json:"deploymentName"`
	ContainerPort  int32  `json:"containerPort,omitempty"`
}

// port is both the Service port and the target port of the API server, as
// in OLM v0: containerPort, 443 when unset.
func (a apiServiceDescription) port() int32 { return cmp.Or(a.ContainerPort, 443) }

// apiServiceName is the name the API server requires of an APIService,
// "<version>.<group>", as OLM v0 names it.
func (a apiServiceDescription) apiServiceName() string { return a.Version + "." + a.Group }

// Priorities OLM v0 gives every APIService it creates.
const (
	apiServiceGroupPriorityMinimum = 2000
	apiServiceVersionPriority      = 15
)

// forbiddenAPIServiceGroups are API groups a bundle's API server may not
// serve: OLM's and rukpak's own, whose objects the provisioner relies on.
// Groups the cluster serves already (built in, or by CRDs) are refused at
// install: their APIServices exist and belong to no release.
var forbiddenAPIServiceGroups = []string{"operators.coreos.com", "olm.operatorframework.io", "core.rukpak.io"}

// validateAPIServices refuses owned API service definitions that cannot
// become exactly one APIService served by a Deployment of the bundle.
func (b *bundle) validateAPIServices() error {
	spec := b.csv.Spec
	if len(spec.APIServiceDefinitions.Owned) == 0 {
		return nil
	}
	deployments := map[string]bool{}
	for _, d := range spec.Install.Spec.Deployments {
		deployments[d.Name] = true
	}
	byCRD := map[string]string{}
	for _, crd := range b.crds {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		// Not NestedSlice: that copies every version's schema.
		field, _, _ := unstructured.NestedFieldNoCopy(crd.Object, "spec", "versions")
		versions, _ := field.([]any)
		for _, v := range versions {
			if name, _ := asMap(v)["name"].(string); name != "" {
				byCRD[name+"."+group] = crd.GetName()
			}
		}
	}
	seen := map[string]bool{}
	for i, a := range spec.APIServiceDefinitions.Owned {
		where := fmt.Sprintf("spec.apiservicedefinitions.owned[%d] (%q)", i, a.apiServiceName())
		if errs := validation.IsDNS1123Subdomain(a.Group); len(errs) > 0 {
			return fmt.Errorf("%s: group %q is not a valid API group: %s", where, a.Group, strings.Join(errs, "; "))
		}
		if errs := validation.IsDNS1035Label(a.Version); len(errs) > 0 {
			return fmt.Errorf("%s: version %q is not a valid API version: %s", where, a.Version, strings.Join(errs, "; "))
		}
		if slices.Contains(forbiddenAPIServiceGroups, a.Group) {
			return fmt.Errorf("%s: API group %q cannot be served by an operator's API server", where, a.Group)
		}
		if seen[a.apiServiceName()] {
			return fmt.Errorf("%s: group %q version %q is defined more than once", where, a.Group, a.Version)
		}
		seen[a.apiServiceName()] = true
		if crd, ok := byCRD[a.apiServiceName()]; ok {
			return fmt.Errorf("%s: group %q version %q is also served by CustomResourceDefinition %q of the bundle", where, a.Group, a.Version, crd)
		}
		if !deployments[a.DeploymentName] {
			return fmt.Errorf("%s: deploymentName %q names no deployment of spec.install.spec.deployments", where, a.DeploymentName)
		}
		if p := a.ContainerPort; p < 0 || p > 65535 {
			return fmt.Errorf("%s: containerPort %d is not a valid port", where, p)
		}
	}
	return nil
}

// apiServiceObject emits the APIService of an owned API service, served by
// Service svc, its CA bundle injected from the certificate.
func (g *generator) apiServiceObject(a apiServiceDescription, svc, caFrom string) error {
	name := a.apiServiceName()
	if !g.names.reserve("APIService", "", name) {
		return fmt.Errorf("the bundle already contains APIService %q", name)
	}
	obj := object("apiregistration.k8s.io/v1", "APIService", name, "", func(m map[string]interface{}) {
		m["spec"] = map[string]interface{}{
			"group":                a.Group,
			"version":              a.Version,
			"groupPriorityMinimum": int64(apiServiceGroupPriorityMinimum),
			"versionPriority":      int64(apiServiceVersionPriority),
			"service":              map[string]interface{}{"namespace": g.t.installNamespace, "name": svc, "port": int64(a.port())},
		}
	})
	addAnnotation(obj, g.injectCAAnnotation(), caFrom)
	g.emit(obj)
	return nil
}

// apiServerRBAC lets the service account of a Deployment serving API
// services delegate authentication and authorization to the API server
// and read the client CA of requests the aggregator forwards, under the
// names OLM v0 gives these bindings.
func (g *generator) apiServerRBAC(d strategyDeployment, svc string) error {
	sa, err := podServiceAccount(d)
	if err != nil {
		return err
	}
	sa = cmp.Or(sa, "default")
	delegator := svc + "-system:auth-delegator"
	if !g.names.reserve("ClusterRoleBinding", "", delegator) {
		return fmt.Errorf("the bundle already contains ClusterRoleBinding %q", delegator)
	}
	reader := svc + "-auth-reader"
	if !g.names.reserve("RoleBinding", "kube-system", reader) {
		return fmt.Errorf("the bundle already contains RoleBinding %q in namespace kube-system", reader)
	}
	subjects := []interface{}{map[string]interface{}{"kind": "ServiceAccount", "name": sa, "namespace": g.t.installNamespace}}
	g.emit(object(rbacAPIVersion, "ClusterRoleBinding", delegator, "", func(m map[string]interface{}) {
		m["roleRef"] = map[string]interface{}{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"}
		m["subjects"] = subjects
	}))
	g.emit(object(rbacAPIVersion, "RoleBinding", reader, "kube-system", func(m map[string]interface{}) {
		m["roleRef"] = map[string]interface{}{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"}
		m["subjects"] = runtime.DeepCopyJSONValue(subjects)
	}))
	return nil
}
