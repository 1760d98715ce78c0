package registry

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rukpak-dev/rukpak/provisioner/servingcert"
)

// Webhook types of a CSV's spec.webhookdefinitions.
const (
	webhookValidating = "ValidatingAdmissionWebhook"
	webhookMutating   = "MutatingAdmissionWebhook"
	webhookConversion = "ConversionWebhook"
)

// webhookDescription is one entry of spec.webhookdefinitions (OLM's
// v1alpha1.WebhookDescription).
type webhookDescription struct {
	GenerateName            string                                          `json:"generateName"`
	Type                    string                                          `json:"type"`
	DeploymentName          string                                          `json:"deploymentName"`
	ContainerPort           int32                                           `json:"containerPort,omitempty"`
	TargetPort              *intstr.IntOrString                             `json:"targetPort,omitempty"`
	Rules                   []admissionregistrationv1.RuleWithOperations    `json:"rules,omitempty"`
	FailurePolicy           *admissionregistrationv1.FailurePolicyType      `json:"failurePolicy,omitempty"`
	MatchPolicy             *admissionregistrationv1.MatchPolicyType        `json:"matchPolicy,omitempty"`
	ObjectSelector          *metav1.LabelSelector                           `json:"objectSelector,omitempty"`
	SideEffects             *admissionregistrationv1.SideEffectClass        `json:"sideEffects,omitempty"`
	TimeoutSeconds          *int32                                          `json:"timeoutSeconds,omitempty"`
	AdmissionReviewVersions []string                                        `json:"admissionReviewVersions,omitempty"`
	ReinvocationPolicy      *admissionregistrationv1.ReinvocationPolicyType `json:"reinvocationPolicy,omitempty"`
	WebhookPath             *string                                         `json:"webhookPath,omitempty"`
	ConversionCRDs          []string                                        `json:"conversionCRDs,omitempty"`
}

// port is the Service port in front of the webhook: containerPort, 443
// when unset.
func (w webhookDescription) port() int32 { return cmp.Or(w.ContainerPort, 443) }

// targetPort is the port the Service sends the webhook's requests to:
// targetPort, else the Service port. 0 (ndb-operator 1.10.0 ships it) and
// "" count as unset: OLM copies them into the Service, where the API server
// defaults them to the port.
func (w webhookDescription) targetPort() intstr.IntOrString {
	if w.hasTargetPort() {
		return *w.TargetPort
	}
	return intstr.FromInt32(w.port())
}

func (w webhookDescription) hasTargetPort() bool {
	t := w.TargetPort
	if t == nil {
		return false
	}
	if t.Type == intstr.Int {
		return t.IntVal != 0
	}
	return t.StrVal != ""
}

// Certificate volumes of a Deployment serving webhooks, where operators
// built with operator-sdk/kubebuilder (controller-runtime's default) and
// OLM's API servers read their serving certificate. Volumes of these names,
// or mounted at these paths, are replaced, as OLM does.
var certVolumes = []struct{ name, path, certFile, keyFile string }{
	{"webhook-cert", "/tmp/k8s-webhook-server/serving-certs", "tls.crt", "tls.key"},
	{"apiservice-cert", "/apiserver.local.config/certificates", "apiserver.crt", "apiserver.key"},
}

// forbiddenWebhookGroups are API groups admission webhooks of a bundle may
// not intercept: every group, OLM's (as OLM refuses), and rukpak's own, so
// an operator's webhook can never block the provisioner's Bundles and
// BundleDeployments.
var forbiddenWebhookGroups = []string{"*", "operators.coreos.com", "olm.operatorframework.io", "core.rukpak.io"}

// Certificate providers of Options.CertificateProvider.
const (
	CertProviderRukpak      = "rukpak"
	CertProviderCertManager = "cert-manager"
)

// certManagerInjectCAFrom is cert-manager's cainjector annotation:
// <namespace>/<Certificate>.
const certManagerInjectCAFrom = "cert-manager.io/inject-ca-from"

func certProvider(p string) (string, error) {
	switch p {
	case "", CertProviderRukpak:
		return CertProviderRukpak, nil
	case CertProviderCertManager:
		return p, nil
	}
	return "", fmt.Errorf("spec.config.certificateProvider %q is not a certificate provider: use %q (the default) or %q", p, CertProviderRukpak, CertProviderCertManager)
}

// validateWebhooks refuses the webhook definitions OLM refuses (v0's
// install strategy and v1's registry+v1 validators), with the reason.
func (b *bundle) validateWebhooks() error {
	spec := b.csv.Spec
	deployments := map[string]bool{}
	for _, d := range spec.Install.Spec.Deployments {
		deployments[d.Name] = true
	}
	crds := map[string]*unstructured.Unstructured{}
	for _, crd := range b.crds {
		crds[crd.GetName()] = crd
	}
	owned := map[string]bool{}
	for _, o := range spec.CustomResourceDefinitions.Owned {
		owned[o.Name] = true
	}
	seen := map[string]bool{}
	converted := map[string]string{}
	for i, w := range spec.WebhookDefinitions {
		where := fmt.Sprintf("spec.webhookdefinitions[%d] (%q)", i, w.GenerateName)
		switch w.Type {
		case webhookValidating, webhookMutating, webhookConversion:
		default:
			return fmt.Errorf("%s: unknown type %q; known types are %s, %s, %s", where, w.Type, webhookValidating, webhookMutating, webhookConversion)
		}
		// The configuration is named generateName without a trailing "-"
		// (OLM v0 used it as a generateName, OLM v1 trims it).
		if errs := validation.IsDNS1123Subdomain(strings.TrimSuffix(w.GenerateName, "-")); len(errs) > 0 {
			return fmt.Errorf("%s: generateName is not a valid object name: %s", where, strings.Join(errs, "; "))
		}
		if seen[w.Type+"/"+w.GenerateName] {
			return fmt.Errorf("%s: a %s named %q is defined more than once", where, w.Type, w.GenerateName)
		}
		seen[w.Type+"/"+w.GenerateName] = true
		if !deployments[w.DeploymentName] {
			return fmt.Errorf("%s: deploymentName %q names no deployment of spec.install.spec.deployments", where, w.DeploymentName)
		}
		if p := w.ContainerPort; p < 0 || p > 65535 {
			return fmt.Errorf("%s: containerPort %d is not a valid port", where, p)
		}
		if w.hasTargetPort() {
			if errs := validatePort(*w.TargetPort); len(errs) > 0 {
				return fmt.Errorf("%s: targetPort %q is not a valid port: %s", where, w.TargetPort.String(), strings.Join(errs, "; "))
			}
		}
		if len(w.AdmissionReviewVersions) == 0 {
			return fmt.Errorf("%s: admissionReviewVersions is empty", where)
		}
		if w.Type != webhookConversion {
			if err := checkWebhookRules(w.Rules); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			continue
		}
		// OLM v0 and v1: conversion is cluster-wide, so only an operator
		// installed once for the whole cluster may serve it.
		if modes := supportedModes(b.csv); len(modes) != 1 || modes[0] != InstallModeAllNamespaces {
			return fmt.Errorf("%s: CSVs with conversion webhooks must support only AllNamespaces install mode (supported install modes: %s)", where, strings.Join(modes, ", "))
		}
		if len(w.ConversionCRDs) == 0 {
			return fmt.Errorf("%s: a conversion webhook must list at least one CRD in conversionCRDs", where)
		}
		for _, name := range w.ConversionCRDs {
			crd, ok := crds[name]
			if !ok || !owned[name] {
				return fmt.Errorf("%s: conversionCRDs names %q, which is not a CustomResourceDefinition the bundle owns", where, name)
			}
			if other, ok := converted[name]; ok {
				return fmt.Errorf("%s: CustomResourceDefinition %q is already converted by webhook %q", where, name, other)
			}
			converted[name] = w.GenerateName
			if keep, _, _ := unstructured.NestedBool(crd.Object, "spec", "preserveUnknownFields"); keep {
				return fmt.Errorf("%s: CustomResourceDefinition %q must set spec.preserveUnknownFields to false for the API server to call a conversion webhook", where, name)
			}
		}
	}
	return nil
}

func validatePort(p intstr.IntOrString) []string {
	if p.Type == intstr.Int {
		return validation.IsValidPortNum(p.IntValue())
	}
	return validation.IsValidPortName(p.StrVal)
}

// checkWebhookRules refuses rules that would let an operator's admission
// webhook intercept every API group, OLM's or rukpak's, or webhook
// configurations themselves.
func checkWebhookRules(rules []admissionregistrationv1.RuleWithOperations) error {
	for _, r := range rules {
		for _, g := range r.APIGroups {
			if slices.Contains(forbiddenWebhookGroups, g) {
				return fmt.Errorf("admission webhook rules cannot reference API group %q", g)
			}
			if g != "admissionregistration.k8s.io" {
				continue
			}
			for _, res := range r.Resources {
				switch strings.ToLower(res) {
				case "*", "*/*", "mutatingwebhookconfigurations", "validatingwebhookconfigurations":
					return fmt.Errorf("admission webhook rules cannot reference resource %q of API group %q", res, g)
				}
			}
		}
	}
	return nil
}

// webhookService names the Service in front of a Deployment's webhooks, as
// OLM does: "<deployment>-service", dots replaced.
func webhookService(deployment string) string {
	return truncateName(strings.ReplaceAll(deployment, ".", "-") + "-service")
}

// certSecret names the Secret holding a Service's serving certificate, as
// OLM does: "<service>-cert".
func certSecret(service string) string { return truncateName(service + "-cert") }

// addServing emits what spec.webhookdefinitions and
// spec.apiservicedefinitions.owned need: per serving Deployment a Service,
// a certificate Secret (issued at install) and the certificate volumes;
// the webhook configurations and the conversion settings of the CRDs; the
// APIServices and what their servers need to delegate authentication.
// Objects that need the CA of a certificate carry
// servingcert.AnnotationInjectCAFrom, the Secret
// servingcert.AnnotationDNSNames.
func (g *generator) addServing() error {
	spec := g.b.csv.Spec
	if len(spec.WebhookDefinitions) == 0 && len(spec.APIServiceDefinitions.Owned) == 0 {
		return nil
	}
	ns := g.t.installNamespace
	webhooksOf := map[string][]webhookDescription{}
	for _, w := range spec.WebhookDefinitions {
		webhooksOf[w.DeploymentName] = append(webhooksOf[w.DeploymentName], w)
	}
	apiServicesOf := map[string][]apiServiceDescription{}
	for _, a := range spec.APIServiceDefinitions.Owned {
		apiServicesOf[a.DeploymentName] = append(apiServicesOf[a.DeploymentName], a)
	}
	for _, d := range spec.Install.Spec.Deployments {
		webhooks, apiServices := webhooksOf[d.Name], apiServicesOf[d.Name]
		if len(webhooks) == 0 && len(apiServices) == 0 {
			continue
		}
		svc := webhookService(d.Name)
		secret := certSecret(svc)
		// As OLM v0, the generated Service and Secret replace any the bundle
		// ships under their names (operator-sdk bundles ship the Service).
		for _, kind := range []string{"Service", "Secret"} {
			name := svc
			if kind == "Secret" {
				name = secret
			}
			if !g.names.reserve(kind, ns, name) {
				g.objs = slices.DeleteFunc(g.objs, func(o *unstructured.Unstructured) bool {
					return o.GetAPIVersion() == "v1" && o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name
				})
			}
		}
		selector, _, err := unstructured.NestedStringMap(d.Spec, "selector", "matchLabels")
		if err != nil || len(selector) == 0 {
			return fmt.Errorf("deployment %q serves webhooks or API services but has no spec.selector.matchLabels for its Service to select its pods", d.Name)
		}
		var served []servedPort
		for _, w := range webhooks {
			served = append(served, servedPort{w.port(), w.targetPort()})
		}
		for _, a := range apiServices {
			served = append(served, servedPort{a.port(), intstr.FromInt32(a.port())})
		}
		ports, err := servicePorts(d.Name, served)
		if err != nil {
			return err
		}
		caFrom, err := g.certificate(svc, secret)
		if err != nil {
			return err
		}
		g.emit(object("v1", "Service", svc, ns, func(m map[string]interface{}) {
			sel := map[string]interface{}{}
			for k, v := range selector {
				sel[k] = v
			}
			m["spec"] = map[string]interface{}{"ports": ports, "selector": sel}
		}))
		for _, obj := range g.objs {
			if obj.GetKind() == "Deployment" && obj.GetAPIVersion() == "apps/v1" && obj.GetName() == d.Name && obj.GetNamespace() == ns {
				if err := mountCertificate(obj, secret); err != nil {
					return fmt.Errorf("deployment %q: %w", d.Name, err)
				}
			}
		}
		for _, w := range webhooks {
			if err := g.webhookObject(w, svc, caFrom); err != nil {
				return err
			}
		}
		if len(apiServices) > 0 {
			if err := g.apiServerRBAC(d, svc); err != nil {
				return err
			}
		}
		for _, a := range apiServices {
			if err := g.apiServiceObject(a, svc, caFrom); err != nil {
				return err
			}
		}
	}
	return nil
}

// certificate emits what issues the serving certificate into Secret
// secret, and returns what the inject-CA annotation names: with rukpak's
// provider the Secret itself, filled at install (package servingcert);
// with cert-manager's a self-signed Issuer and a Certificate, as OLM v1's
// cert-manager provider does.
func (g *generator) certificate(svc, secret string) (string, error) {
	ns := g.t.installNamespace
	dnsNames := servingcert.ServiceDNSNames(svc, ns)
	if g.t.certProvider != CertProviderCertManager {
		g.emit(object("v1", "Secret", secret, ns, func(m map[string]interface{}) {
			m["metadata"].(map[string]interface{})["annotations"] = map[string]interface{}{
				servingcert.AnnotationDNSNames: strings.Join(dnsNames, ","),
			}
			m["type"] = "kubernetes.io/tls"
		}))
		return ns + "/" + secret, nil
	}
	issuer := truncateName(secret + "-selfsigned-issuer")
	for _, o := range [][2]string{{"Issuer", issuer}, {"Certificate", secret}} {
		if !g.names.reserve(o[0], ns, o[1]) {
			return "", fmt.Errorf("the bundle already contains %s %q", o[0], o[1])
		}
	}
	g.emit(object("cert-manager.io/v1", "Issuer", issuer, ns, func(m map[string]interface{}) {
		m["spec"] = map[string]interface{}{"selfSigned": map[string]interface{}{}}
	}))
	g.emit(object("cert-manager.io/v1", "Certificate", secret, ns, func(m map[string]interface{}) {
		m["spec"] = map[string]interface{}{
			"secretName": secret,
			"dnsNames":   stringsToInterfaces(dnsNames),
			"usages":     []interface{}{"server auth"},
			"issuerRef":  map[string]interface{}{"name": issuer},
		}
	}))
	return ns + "/" + secret, nil
}

func (g *generator) injectCAAnnotation() string {
	if g.t.certProvider == CertProviderCertManager {
		return certManagerInjectCAFrom
	}
	return servingcert.AnnotationInjectCAFrom
}

// servedPort is one port of a serving Deployment's Service.
type servedPort struct {
	port   int32
	target intstr.IntOrString
}

// servicePorts lists a Deployment's served ports, sorted and without
// repeats; one port may not lead to two target ports.
func servicePorts(deployment string, served []servedPort) ([]interface{}, error) {
	targets := map[int32]intstr.IntOrString{}
	for _, s := range served {
		if t, ok := targets[s.port]; ok && t != s.target {
			return nil, fmt.Errorf("webhooks and API services of deployment %q send port %d to both target port %s and %s", deployment, s.port, t.String(), s.target.String())
		}
		targets[s.port] = s.target
	}
	var out []interface{}
	for _, p := range slices.Sorted(maps.Keys(targets)) {
		t := targets[p]
		var target interface{} = t.StrVal
		if t.Type == intstr.Int {
			target = int64(t.IntVal)
		}
		out = append(out, map[string]interface{}{"name": strconv.Itoa(int(p)), "port": int64(p), "targetPort": target})
	}
	return out, nil
}

// webhookObject emits an admission webhook's configuration, or sets the
// conversion of the CRDs a conversion webhook converts.
func (g *generator) webhookObject(w webhookDescription, svc, caFrom string) error {
	ns := g.t.installNamespace
	port := int64(w.port())
	if w.Type == webhookConversion {
		path := "/"
		if w.WebhookPath != nil {
			path = *w.WebhookPath
		}
		for _, obj := range g.objs {
			if obj.GetKind() != kindCRD || !slices.Contains(w.ConversionCRDs, obj.GetName()) {
				continue
			}
			conversion := map[string]interface{}{
				"strategy": "Webhook",
				"webhook": map[string]interface{}{
					"clientConfig": map[string]interface{}{
						"service": map[string]interface{}{"namespace": ns, "name": svc, "path": path, "port": port},
					},
					"conversionReviewVersions": stringsToInterfaces(w.AdmissionReviewVersions),
				},
			}
			if err := unstructured.SetNestedMap(obj.Object, conversion, "spec", "conversion"); err != nil {
				return fmt.Errorf("CustomResourceDefinition %q: spec.conversion: %w", obj.GetName(), err)
			}
			addAnnotation(obj, g.injectCAAnnotation(), caFrom)
		}
		return nil
	}

	name := strings.TrimSuffix(w.GenerateName, "-")
	kind := "ValidatingWebhookConfiguration"
	if w.Type == webhookMutating {
		kind = "MutatingWebhookConfiguration"
	}
	if !g.names.reserve(kind, "", name) {
		return fmt.Errorf("%s %q is generated twice", kind, name)
	}
	service := map[string]interface{}{"namespace": ns, "name": svc, "port": port}
	if w.WebhookPath != nil {
		service["path"] = *w.WebhookPath
	}
	hook := map[string]interface{}{
		"name":                    name,
		"clientConfig":            map[string]interface{}{"service": service},
		"admissionReviewVersions": stringsToInterfaces(w.AdmissionReviewVersions),
	}
	if len(w.Rules) > 0 {
		rules, err := toJSONValue(w.Rules)
		if err != nil {
			return fmt.Errorf("webhook %q: rules: %w", w.GenerateName, err)
		}
		hook["rules"] = rules
	}
	if w.ObjectSelector != nil {
		sel, err := toJSONValue(w.ObjectSelector)
		if err != nil {
			return fmt.Errorf("webhook %q: objectSelector: %w", w.GenerateName, err)
		}
		hook["objectSelector"] = sel
	}
	for field, v := range map[string]*string{
		"failurePolicy": (*string)(w.FailurePolicy),
		"matchPolicy":   (*string)(w.MatchPolicy),
		"sideEffects":   (*string)(w.SideEffects),
	} {
		if v != nil {
			hook[field] = *v
		}
	}
	if w.TimeoutSeconds != nil {
		hook["timeoutSeconds"] = int64(*w.TimeoutSeconds)
	}
	if w.Type == webhookMutating && w.ReinvocationPolicy != nil {
		hook["reinvocationPolicy"] = string(*w.ReinvocationPolicy)
	}
	// In OwnNamespace, SingleNamespace and MultiNamespace modes the webhook
	// sees only the watched namespaces (cluster-scoped objects always reach
	// it), as OLM v1 does.
	if !g.t.allNamespaces() {
		hook["namespaceSelector"] = map[string]interface{}{
			"matchExpressions": []interface{}{map[string]interface{}{
				"key":      "kubernetes.io/metadata.name",
				"operator": "In",
				"values":   stringsToInterfaces(g.t.watchNamespaces),
			}},
		}
	}
	obj := object("admissionregistration.k8s.io/v1", kind, name, "", func(m map[string]interface{}) {
		m["webhooks"] = []interface{}{hook}
	})
	addAnnotation(obj, g.injectCAAnnotation(), caFrom)
	g.emit(obj)
	return nil
}

// mountCertificate replaces the Deployment's certificate volumes (by name,
// or by the path they are mounted at in any container) with the serving
// certificate Secret, mounted in every container.
func mountCertificate(dep *unstructured.Unstructured, secret string) error {
	spec, _, err := unstructured.NestedMap(dep.Object, "spec", "template", "spec")
	if err != nil {
		return fmt.Errorf("spec.template.spec: %w", err)
	}
	if spec == nil {
		spec = map[string]interface{}{}
	}
	containers, _, err := unstructured.NestedSlice(spec, "containers")
	if err != nil {
		return fmt.Errorf("spec.template.spec.containers: %w", err)
	}
	replaced := map[string]bool{}
	paths := map[string]bool{}
	for _, v := range certVolumes {
		replaced[v.name] = true
		paths[v.path] = true
	}
	for _, c := range containers {
		mounts, _, _ := unstructured.NestedSlice(asMap(c), "volumeMounts")
		for _, m := range mounts {
			if p, _ := asMap(m)["mountPath"].(string); paths[p] {
				if n, _ := asMap(m)["name"].(string); n != "" {
					replaced[n] = true
				}
			}
		}
	}
	volumes, _, err := unstructured.NestedSlice(spec, "volumes")
	if err != nil {
		return fmt.Errorf("spec.template.spec.volumes: %w", err)
	}
	volumes = slices.DeleteFunc(volumes, func(v interface{}) bool {
		n, _ := asMap(v)["name"].(string)
		return replaced[n]
	})
	var mounts []interface{}
	for _, v := range certVolumes {
		volumes = append(volumes, map[string]interface{}{
			"name": v.name,
			"secret": map[string]interface{}{
				"secretName": secret,
				"items": []interface{}{
					map[string]interface{}{"key": "tls.crt", "path": v.certFile},
					map[string]interface{}{"key": "tls.key", "path": v.keyFile},
				},
			},
		})
		mounts = append(mounts, map[string]interface{}{"name": v.name, "mountPath": v.path})
	}
	for i, c := range containers {
		cm := asMap(c)
		if cm == nil {
			return fmt.Errorf("spec.template.spec.containers[%d] is not an object", i)
		}
		existing, _, err := unstructured.NestedSlice(cm, "volumeMounts")
		if err != nil {
			return fmt.Errorf("spec.template.spec.containers[%d].volumeMounts: %w", i, err)
		}
		existing = slices.DeleteFunc(existing, func(m interface{}) bool {
			n, _ := asMap(m)["name"].(string)
			return replaced[n]
		})
		cm["volumeMounts"] = append(existing, runtime.DeepCopyJSONValue(mounts).([]interface{})...)
		containers[i] = cm
	}
	spec["containers"] = containers
	spec["volumes"] = volumes
	return unstructured.SetNestedMap(dep.Object, spec, "spec", "template", "spec")
}

func asMap(v interface{}) map[string]interface{} {
	m, _ := v.(map[string]interface{})
	return m
}

func addAnnotation(obj *unstructured.Unstructured, k, v string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	obj.SetAnnotations(a)
}

func stringsToInterfaces(s []string) []interface{} {
	out := make([]interface{}, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// toJSONValue turns a typed value into its unstructured form.
func toJSONValue(v interface{}) (interface{}, error) {
	switch t := v.(type) {
	case []admissionregistrationv1.RuleWithOperations:
		out := make([]interface{}, 0, len(t))
		for i := range t {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&t[i])
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
		return out, nil
	default:
		return runtime.DefaultUnstructuredConverter.ToUnstructured(v)
	}
}
