package registry

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The subset of an OLM ClusterServiceVersion that conversion needs. It is
// decoded leniently: CSVs carry many fields (descriptions, icons, ...) that
// have no bearing on what gets installed.
type clusterServiceVersion struct {
	Metadata csvMetadata `json:"metadata"`
	Spec     csvSpec     `json:"spec"`
}

type csvMetadata struct {
	Name        string            `json:"name"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type csvSpec struct {
	InstallModes              []installMode         `json:"installModes,omitempty"`
	Install                   installStrategy       `json:"install"`
	CustomResourceDefinitions crdDefinitions        `json:"customresourcedefinitions,omitempty"`
	APIServiceDefinitions     apiServiceDefinitions `json:"apiservicedefinitions,omitempty"`
	WebhookDefinitions        []webhookDescription  `json:"webhookdefinitions,omitempty"`
}

type installMode struct {
	Type      string `json:"type"`
	Supported bool   `json:"supported"`
}

type installStrategy struct {
	Strategy string              `json:"strategy"`
	Spec     installStrategySpec `json:"spec,omitempty"`
}

type installStrategySpec struct {
	Deployments        []strategyDeployment `json:"deployments,omitempty"`
	Permissions        []permission         `json:"permissions,omitempty"`
	ClusterPermissions []permission         `json:"clusterPermissions,omitempty"`
}

type strategyDeployment struct {
	Name  string            `json:"name"`
	Label map[string]string `json:"label,omitempty"`
	// Spec stays unstructured so the Deployment is installed exactly as
	// written, without defaulted or reordered fields.
	Spec map[string]interface{} `json:"spec"`
}

type permission struct {
	ServiceAccountName string        `json:"serviceAccountName"`
	Rules              []interface{} `json:"rules"`
}

type crdDefinitions struct {
	Owned []crdDescription `json:"owned,omitempty"`
}

type crdDescription struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Kind    string `json:"kind,omitempty"`
}

type apiServiceDefinitions struct {
	Owned []apiServiceDescription `json:"owned,omitempty"`
}

func decodeCSV(obj *unstructured.Unstructured) (*clusterServiceVersion, error) {
	var csv clusterServiceVersion
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.UnstructuredContent(), &csv); err != nil {
		return nil, fmt.Errorf("decode ClusterServiceVersion %q: %w", obj.GetName(), err)
	}
	return &csv, nil
}
