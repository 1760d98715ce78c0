package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BundleDeploymentSpec defines the desired state of a BundleDeployment.
type BundleDeploymentSpec struct {
	// provisionerClassName names the provisioner that installs the Bundle.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	// +required
	ProvisionerClassName string `json:"provisionerClassName"`
	// template describes the Bundle generated for this BundleDeployment.
	// Changing it generates a new Bundle and pivots to it once installed.
	// +required
	Template BundleTemplate `json:"template"`
	// config holds provisioner-specific settings. The registry+v1 content
	// accepts {"installNamespace": "ns", "watchNamespaces": ["ns", ...]}.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Config *apiextensionsv1.JSON `json:"config,omitempty"`
	// paused stops installs, upgrades, pivots and drift correction while
	// true (the Paused condition says since when); setting it back to false
	// resumes them. Deleting a paused BundleDeployment still uninstalls it.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// serviceAccount is the identity the bundle's objects are installed,
	// upgraded, corrected and uninstalled with (the provisioner
	// impersonates it), instead of the provisioner's own cluster-admin
	// rights; release records stay the provisioner's. It names a namespace
	// as well as a name because a BundleDeployment is cluster-scoped:
	// Flux's serviceAccountName and kapp-controller's App take the name
	// only, from the namespace of their namespaced object. Before anything
	// is applied, the provisioner checks that it may do everything the
	// bundle needs and lists the missing rules in the Installed condition.
	// Setting or changing it requires impersonate on the ServiceAccount
	// (the webhook checks), as acting as it directly would.
	// Unset: the provisioner's --default-service-account, else the
	// provisioner's own identity (unless the provisioner requires one).
	// +optional
	ServiceAccount *ServiceAccountReference `json:"serviceAccount,omitempty"`
	// upgradeApproval says whether a pivot to a new Bundle (a template
	// change after the first install) proceeds on its own (Automatic, the
	// default) or waits for approval (Manual), as OLM's Subscription
	// spec.installPlanApproval does for new operator versions. In Manual
	// mode the first install proceeds; each later pivot waits, with the
	// PivotPending condition and status.pendingBundle naming the target
	// Bundle and a server-side dry-run preview of what it would create,
	// change and delete, until the annotation core.rukpak.io/approved-bundle
	// is set to that Bundle's name. Meanwhile the active Bundle stays
	// installed and drift-corrected. The mode is a spec field because it is
	// policy that belongs with the desired state (and in Git); the approval
	// is an annotation because it is an act on one named target, which an
	// approver makes without editing the spec (and without bumping its
	// generation). A spec.config change of the active Bundle (helm values,
	// install namespaces) waits too, with the ConfigPending condition and
	// status.pendingConfig naming it, until the annotation is set to that
	// name; meanwhile nothing is installed or corrected. A pivot approved
	// with a changed spec.config installs with it (the preview shows it).
	// +kubebuilder:validation:Enum=Automatic;Manual
	// +optional
	UpgradeApproval UpgradeApproval `json:"upgradeApproval,omitempty"`
}

// UpgradeApproval is the approval mode of a BundleDeployment's pivots.
type UpgradeApproval string

// Upgrade approval modes.
const (
	UpgradeApprovalAutomatic UpgradeApproval = "Automatic"
	UpgradeApprovalManual    UpgradeApproval = "Manual"
)

// AnnotationApprovedBundle on a BundleDeployment with spec.upgradeApproval
// Manual approves the pivot to the generated Bundle it names (as
// status.pendingBundle shows it), or the spec.config change it names (as
// status.pendingConfig shows it, <bundle>/config-<fingerprint>). An
// approval stays valid for that Bundle or config only: a later template
// change generates another Bundle, which waits again. Setting it takes the
// verb approve on the BundleDeployment (the webhook checks), beyond patch.
const AnnotationApprovedBundle = "core.rukpak.io/approved-bundle"

// The PivotPending condition is True while a pivot waits for approval
// (spec.upgradeApproval Manual), with reason ReasonAwaitingApproval and a
// message naming the target Bundle and the preview of the pivot; it is
// absent otherwise.
const (
	TypePivotPending       = "PivotPending"
	ReasonAwaitingApproval = "AwaitingApproval"
)

// The ConfigPending condition is True while a spec.config change of the
// active Bundle waits for approval (spec.upgradeApproval Manual), with
// reason ReasonAwaitingApproval and a message naming what to approve and
// the preview of the change; it is absent otherwise.
const TypeConfigPending = "ConfigPending"

// Reasons of the Installed condition about spec.serviceAccount.
const (
	// ReasonInsufficientPermissions: the ServiceAccount lacks rules the
	// bundle needs; the message lists them as Role rules. Nothing was
	// applied.
	ReasonInsufficientPermissions = "InsufficientPermissions"
	// ReasonServiceAccountRequired: the provisioner requires an identity
	// (--require-service-account) and the BundleDeployment names none.
	ReasonServiceAccountRequired = "ServiceAccountRequired"
)

// ServiceAccountReference names a ServiceAccount.
type ServiceAccountReference struct {
	// name of the ServiceAccount.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`
	// namespace of the ServiceAccount.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace"`
}

// BundleTemplate is the template of a generated Bundle.
type BundleTemplate struct {
	// metadata: only labels and annotations are used.
	// +optional
	Metadata TemplateMetadata `json:"metadata,omitempty"`
	// spec of the generated Bundle.
	// +required
	Spec BundleSpec `json:"spec"`
}

// TemplateMetadata is the part of object metadata a template may set.
type TemplateMetadata struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// BundleDeploymentStatus is the observed state of a BundleDeployment.
type BundleDeploymentStatus struct {
	// activeBundle is the generated Bundle whose content is installed.
	// +optional
	ActiveBundle string `json:"activeBundle,omitempty"`
	// observedGeneration is the generation last processed.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// lastHandledReconcileAt is the value of the
	// core.rukpak.io/reconcile-requested-at annotation last acted on.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
	// pendingBundle is the generated Bundle a pivot waits to install until
	// it is approved (spec.upgradeApproval Manual); the PivotPending
	// condition says what the pivot would change.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PendingBundle string `json:"pendingBundle,omitempty"`
	// installedAs is the identity the release was last installed or
	// upgraded with, written only by the provisioner: an uninstall goes as
	// this identity, not as whatever spec.serviceAccount says when the
	// BundleDeployment is deleted. Unset until the first install (and on
	// releases installed before it was recorded, which uninstall as the
	// spec says).
	// +optional
	InstalledAs *InstalledIdentity `json:"installedAs,omitempty"`
	// installedConfig fingerprints the spec.config the release was last
	// installed or upgraded with (the first 16 hex digits of the SHA-256
	// of its canonical JSON), written only by the provisioner: with
	// spec.upgradeApproval Manual a spec.config that differs from it waits
	// for approval.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	InstalledConfig string `json:"installedConfig,omitempty"`
	// pendingConfig names a spec.config change that waits for approval
	// (spec.upgradeApproval Manual), as <bundle>/config-<fingerprint>: set
	// the annotation core.rukpak.io/approved-bundle to it to proceed. The
	// ConfigPending condition says what the change would do.
	// +optional
	// +kubebuilder:validation:MaxLength=300
	PendingConfig string `json:"pendingConfig,omitempty"`
	// catalog says, for a template with a catalog source, which catalog
	// bundle is installed, which one the last resolution picked and what
	// is out of reach.
	// +optional
	Catalog *CatalogSourceStatus `json:"catalog,omitempty"`
	// conditions: HasValidBundle, Installed, Healthy, and Paused while
	// spec.paused is true; with a catalog source also Resolved and the
	// deprecation conditions (Deprecated, PackageDeprecated,
	// ChannelDeprecated, BundleDeprecated).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// generatedBundles records the Bundles the provisioner created for this
	// BundleDeployment, by UID. Only a Bundle recorded here is installed: a
	// Bundle someone else created under the generated name (with labels and
	// owner references copied) is refused. Written only by the provisioner.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	GeneratedBundles []GeneratedBundle `json:"generatedBundles,omitempty"`
}

// CatalogSourceStatus is what a catalog source resolved to.
type CatalogSourceStatus struct {
	// installed is the catalog bundle the active Bundle was generated
	// from; the CatalogProvided policy takes upgrade edges from it.
	// Written only by the provisioner, once that Bundle is installed.
	// +optional
	Installed *CatalogBundle `json:"installed,omitempty"`
	// resolved is the catalog bundle the last successful resolution
	// picked, and the upgrade edge that allowed it. It is installed unless
	// a pivot to it waits (for approval, an unpack, a failed install).
	// +optional
	Resolved *ResolvedCatalogBundle `json:"resolved,omitempty"`
	// unreachable lists versions above the installed one, in the requested
	// channels and range of the resolved bundle's catalog, that no chain of
	// upgrade edges from the installed bundle reaches (CatalogProvided
	// only), lowest first; at most 64 are listed.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Unreachable []string `json:"unreachable,omitempty"`
	// unreachableTotal counts them all.
	// +optional
	UnreachableTotal int32 `json:"unreachableTotal,omitempty"`
}

// CatalogBundle is one bundle of a catalog.
type CatalogBundle struct {
	// package the bundle belongs to.
	// +kubebuilder:validation:MaxLength=253
	Package string `json:"package"`
	// name of the bundle in the catalog (its olm.bundle name).
	// +kubebuilder:validation:MaxLength=1024
	Name string `json:"name"`
	// version of the bundle (its olm.package property).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version,omitempty"`
	// image of the bundle, as the catalog names it.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Image string `json:"image,omitempty"`
	// catalog is the Catalog the bundle was resolved from.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Catalog string `json:"catalog,omitempty"`
	// channels are the requested channels (all, when none were
	// requested) that hold the bundle.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Channels []string `json:"channels,omitempty"`
}

// ResolvedCatalogBundle is a resolved bundle and why it was allowed.
type ResolvedCatalogBundle struct {
	CatalogBundle `json:",inline"`
	// edge is why the bundle may follow the installed one: InitialInstall
	// (nothing installed), Installed (the installed version itself),
	// Replaces, Skips or SkipRange (its channel entry's upgrade edge from
	// the installed bundle), or SelfCertified (any version in range).
	// +optional
	// +kubebuilder:validation:Enum=InitialInstall;Installed;Replaces;Skips;SkipRange;SelfCertified
	Edge string `json:"edge,omitempty"`
}

// Conditions of a BundleDeployment whose template has a catalog source.
const (
	// TypeResolved is True when the catalog source resolved to a bundle,
	// False (ReasonResolutionFailed) when it did not; the installed
	// content keeps running meanwhile.
	TypeResolved           = "Resolved"
	ReasonResolved         = "Resolved"
	ReasonResolutionFailed = "ResolutionFailed"

	// The deprecation conditions, as OLM v1's ClusterExtension has them,
	// with the catalog's messages: the package, a requested channel (the
	// resolved bundle's channels when none are requested), the resolved
	// or the installed bundle; Deprecated is True when any of them is.
	TypeDeprecated        = "Deprecated"
	TypePackageDeprecated = "PackageDeprecated"
	TypeChannelDeprecated = "ChannelDeprecated"
	TypeBundleDeprecated  = "BundleDeprecated"
	ReasonDeprecated      = "Deprecated"
	ReasonNotDeprecated   = "NotDeprecated"
)

// InstalledIdentity is an identity a release was installed with.
type InstalledIdentity struct {
	// serviceAccount the release was installed as (impersonated); unset:
	// the provisioner's own identity.
	// +optional
	ServiceAccount *ServiceAccountReference `json:"serviceAccount,omitempty"`
}

// GeneratedBundle is a Bundle the provisioner created for a
// BundleDeployment.
type GeneratedBundle struct {
	// name of the Bundle.
	// +required
	Name string `json:"name"`
	// uid of the Bundle the provisioner created. Empty while the creation is
	// in flight: the name is recorded before the create request, the UID
	// after it succeeds (the first Bundle's name is recorded in the
	// annotation core.rukpak.io/creating-bundle instead, with the
	// finalizer).
	// +optional
	UID types.UID `json:"uid,omitempty"`
}

// BundleDeployment installs the content of a Bundle generated from its
// template, and pivots to a new Bundle when the template changes. Its name
// is at most 45 characters, so that its Bundles' (7 more) fit in 52 (the
// CRD's maxLength, added by hack/crdpatch).
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName={bd,bds}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Active Bundle",type=string,JSONPath=`.status.activeBundle`
// +kubebuilder:printcolumn:name="Install State",type=string,JSONPath=`.status.conditions[?(.type=="Installed")].reason`
// +kubebuilder:printcolumn:name="Paused",type=string,JSONPath=`.status.conditions[?(.type=="Paused")].status`
// +kubebuilder:printcolumn:name="Pending Bundle",type=string,JSONPath=`.status.pendingBundle`
// +kubebuilder:printcolumn:name="Installed Version",type=string,JSONPath=`.status.catalog.installed.version`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Provisioner",type=string,JSONPath=`.spec.provisionerClassName`,priority=1
// +kubebuilder:printcolumn:name="Upgrade Approval",type=string,JSONPath=`.spec.upgradeApproval`,priority=1
type BundleDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec BundleDeploymentSpec `json:"spec"`
	// +optional
	Status BundleDeploymentStatus `json:"status,omitempty"`
}

// BundleDeploymentList is a list of BundleDeployments.
// +kubebuilder:object:root=true
type BundleDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BundleDeployment `json:"items"`
}
