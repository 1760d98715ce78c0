package bundledeployment

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rukpakv1alpha1 "github.com/rukpak-dev/rukpak/api/v1alpha1"
)

func TestPlaceObjects(t *testing.T) {
	cases := []struct {
		name, config string
		// want is the namespace of an object that names none, or the error.
		want, wantErr string
	}{
		{name: "no config", want: ""},
		{name: "config without installNamespace", config: `{"watchNamespaces":["a"]}`, want: ""},
		{name: "installNamespace", config: `{"installNamespace":"team-a"}`, want: "team-a"},
		{name: "invalid name", config: `{"installNamespace":"Team_A"}`,
			wantErr: `spec.config.installNamespace "Team_A" is not a valid namespace name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{name: "not a string", config: `{"installNamespace":3}`,
			wantErr: "invalid spec.config: json: cannot unmarshal number into Go struct field .installNamespace of type string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bd := &rukpakv1alpha1.BundleDeployment{}
			if tc.config != "" {
				bd.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(tc.config)}
			}
			loose := &unstructured.Unstructured{}
			loose.SetKind("ConfigMap")
			loose.SetName("loose")
			placed := &unstructured.Unstructured{}
			placed.SetKind("ConfigMap")
			placed.SetName("placed")
			placed.SetNamespace("elsewhere")
			err := placeObjects([]*unstructured.Unstructured{loose, placed}, bd)
			switch {
			case tc.wantErr != "":
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got %v\nwant %s", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if loose.GetNamespace() != tc.want || placed.GetNamespace() != "elsewhere" {
				t.Errorf("namespaces %q and %q, want %q and %q", loose.GetNamespace(), placed.GetNamespace(), tc.want, "elsewhere")
			}
		})
	}
}

func TestOwnedElsewhere(t *testing.T) {
	want := &unstructured.Unstructured{}
	want.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "a", "meta.helm.sh/release-namespace": "rukpak-system"})
	want.SetLabels(map[string]string{rukpakv1alpha1.LabelOwnerKind: "BundleDeployment", rukpakv1alpha1.LabelOwnerName: "a"})
	cases := []struct {
		name        string
		annotations map[string]string
		labels      map[string]string
		want        string
	}{
		{name: "its own", annotations: want.GetAnnotations(), labels: want.GetLabels()},
		{name: "no ownership metadata (edited by hand)"},
		{name: "another release", annotations: map[string]string{"meta.helm.sh/release-name": "b", "meta.helm.sh/release-namespace": "rukpak-system"}, want: "release rukpak-system/b"},
		{name: "the same name in another release namespace", annotations: map[string]string{"meta.helm.sh/release-name": "a", "meta.helm.sh/release-namespace": "other"}, want: "release other/a"},
		{name: "another bundle deployment's label", labels: map[string]string{rukpakv1alpha1.LabelOwnerKind: "BundleDeployment", rukpakv1alpha1.LabelOwnerName: "b"}, want: "bundle deployment b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := &metav1.ObjectMeta{Annotations: tc.annotations, Labels: tc.labels}
			if got := ownedElsewhere(want, live); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
