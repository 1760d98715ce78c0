package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CatalogSpec defines the desired state of a Catalog.
type CatalogSpec struct {
	// source is where the catalog's file-based catalog (FBC) content comes
	// from: an FBC image as catalogs are published, a git repository, an
	// http archive or ConfigMaps, with the same rules as a Bundle's
	// source. An image's configs/ directory is read when it has one.
	// +required
	Source BundleSource `json:"source"`
	// pollInterval is how often a source that can move (an image by tag,
	// a git branch or tag, an http URL, ConfigMaps without a digest) is
	// fetched again; new content replaces the served catalog. Unset: the
	// source is fetched when the Catalog changes only.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="pollInterval must be at least 1m"
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`
	// priority orders catalogs when more than one offers a package: the
	// higher wins. Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=-2147483648
	// +kubebuilder:validation:Maximum=2147483647
	Priority int32 `json:"priority,omitempty"`
}

// CatalogStatus is the observed state of a Catalog.
type CatalogStatus struct {
	// resolvedSource is the source pinned to what is served: an image by
	// digest, a git commit, ConfigMaps by digest.
	// +optional
	ResolvedSource *BundleSource `json:"resolvedSource,omitempty"`
	// contentURL is where authorised clients read the catalog:
	// <contentURL>index.json, <contentURL>all.jsonl and
	// <contentURL>packages/<package>.jsonl.
	// +optional
	ContentURL string `json:"contentURL,omitempty"`
	// contentDigest is the SHA-256 digest ("sha256:<hex>") of all.jsonl.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	ContentDigest string `json:"contentDigest,omitempty"`
	// lastUnpacked is when the served content was last fetched and
	// validated.
	// +optional
	LastUnpacked *metav1.Time `json:"lastUnpacked,omitempty"`
	// packages, channels and bundles count what is served.
	// +optional
	Packages int32 `json:"packages,omitempty"`
	// +optional
	Channels int32 `json:"channels,omitempty"`
	// +optional
	Bundles int32 `json:"bundles,omitempty"`
	// observedGeneration is the generation last processed.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Unpacked (the last fetch of the current spec) and Serving
	// (content is served; a failed fetch keeps serving what was).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Catalog is a file-based catalog of operator packages, unpacked,
// validated and served by the provisioner.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.source.type`
// +kubebuilder:printcolumn:name="Serving",type=string,JSONPath=`.status.conditions[?(@.type=="Serving")].status`
// +kubebuilder:printcolumn:name="Packages",type=integer,JSONPath=`.status.packages`
// +kubebuilder:printcolumn:name="Bundles",type=integer,JSONPath=`.status.bundles`
// +kubebuilder:printcolumn:name="Last Unpacked",type=date,JSONPath=`.status.lastUnpacked`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`,priority=1
// +kubebuilder:printcolumn:name="Resolved Source",type=string,JSONPath=`.status.resolvedSource`,priority=1
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="metadata.name must be at most 52 characters"
// +kubebuilder:validation:XValidation:rule="self.spec.source.type != 'catalog'",message="spec.source.type \"catalog\" is for bundle deployment templates only"
type Catalog struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec CatalogSpec `json:"spec"`
	// +optional
	Status CatalogStatus `json:"status,omitempty"`
}

// CatalogList is a list of Catalogs.
// +kubebuilder:object:root=true
type CatalogList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Catalog `json:"items"`
}

// FinalizerDeleteCachedCatalog guards a Catalog until its stored content
// has been removed.
const FinalizerDeleteCachedCatalog = "core.rukpak.io/delete-cached-catalog"

// Catalog condition types and reasons.
const (
	// TypeServing is True while the catalog's content is served.
	TypeServing = "Serving"

	ReasonServing        = "Serving"
	ReasonNotServing     = "NotServing"
	ReasonCatalogInvalid = "CatalogInvalid"
)
