package registry

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rukpak-dev/rukpak/provisioner/plain"
)

func apiServiceCSV(services ...map[string]interface{}) map[string]interface{} {
	csv := testCSV(InstallModeAllNamespaces)
	owned := make([]interface{}, len(services))
	for i, s := range services {
		owned[i] = s
	}
	csv["spec"].(map[string]interface{})["apiservicedefinitions"] = map[string]interface{}{"owned": owned}
	return csv
}

func apiService(group, version string, extra map[string]interface{}) map[string]interface{} {
	a := map[string]interface{}{"name": "bars." + group, "group": group, "version": version, "kind": "Bar", "deploymentName": "op", "containerPort": 8443}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

func TestAPIServiceDefinitionsRefused(t *testing.T) {
	tests := []struct {
		name string
		csv  map[string]interface{}
		want string
	}{
		{
			name: "invalid group",
			csv:  apiServiceCSV(apiService("Bad_Group", "v1", nil)),
			want: `spec.apiservicedefinitions.owned[0] ("v1.Bad_Group"): group "Bad_Group" is not a valid API group: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		{
			name: "no group",
			csv:  apiServiceCSV(apiService("", "v1", nil)),
			want: `spec.apiservicedefinitions.owned[0] ("v1."): group "" is not a valid API group: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		{
			name: "invalid version",
			csv:  apiServiceCSV(apiService("bars.example.com", "1.0", nil)),
			want: `spec.apiservicedefinitions.owned[0] ("1.0.bars.example.com"): version "1.0" is not a valid API version: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
		},
		{
			name: "rukpak's group",
			csv:  apiServiceCSV(apiService("core.rukpak.io", "v1alpha1", nil)),
			want: `spec.apiservicedefinitions.owned[0] ("v1alpha1.core.rukpak.io"): API group "core.rukpak.io" cannot be served by an operator's API server`,
		},
		{
			name: "OLM's group",
			csv:  apiServiceCSV(apiService("operators.coreos.com", "v2", nil)),
			want: `spec.apiservicedefinitions.owned[0] ("v2.operators.coreos.com"): API group "operators.coreos.com" cannot be served by an operator's API server`,
		},
		{
			name: "twice",
			csv:  apiServiceCSV(apiService("bars.example.com", "v1", nil), apiService("bars.example.com", "v1", map[string]interface{}{"name": "other"})),
			want: `spec.apiservicedefinitions.owned[1] ("v1.bars.example.com"): group "bars.example.com" version "v1" is defined more than once`,
		},
		{
			name: "also served by a CRD of the bundle",
			csv:  apiServiceCSV(apiService("example.com", "v1", nil)),
			want: `spec.apiservicedefinitions.owned[0] ("v1.example.com"): group "example.com" version "v1" is also served by CustomResourceDefinition "foos.example.com" of the bundle`,
		},
		{
			name: "unknown deployment",
			csv:  apiServiceCSV(apiService("bars.example.com", "v1", map[string]interface{}{"deploymentName": "nope"})),
			want: `spec.apiservicedefinitions.owned[0] ("v1.bars.example.com"): deploymentName "nope" names no deployment of spec.install.spec.deployments`,
		},
		{
			name: "invalid port",
			csv:  apiServiceCSV(apiService("bars.example.com", "v1", map[string]interface{}{"containerPort": 70000})),
			want: `spec.apiservicedefinitions.owned[0] ("v1.bars.example.com"): containerPort 70000 is not a valid port`,
		},
		{
			name: "webhook and API service on one port, two targets",
			csv: func() map[string]interface{} {
				csv := apiServiceCSV(apiService("bars.example.com", "v1", map[string]interface{}{"containerPort": 443}))
				csv["spec"].(map[string]interface{})["webhookdefinitions"] = []interface{}{hook(webhookValidating, "v.example.com", nil)}
				return csv
			}(),
			want: `webhooks and API services of deployment "op" send port 443 to both target port 9443 and 443`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Convert(testBundle(t, tc.csv), Options{})
			want := `ClusterServiceVersion "op.v1.0.0": ` + tc.want
			if tc.name == "webhook and API service on one port, two targets" {
				want = tc.want
			}
			if err == nil || err.Error() != want {
				t.Fatalf("got %v\nwant %s", err, want)
			}
		})
	}
}

// TestAPIServiceBundle pins what the test bundle with owned API services
// and a webhook served by one Deployment converts to, with each
// certificate provider: one Service, one certificate, both certificate
// mounts, the API server's bindings and the APIServices.
func TestAPIServiceBundle(t *testing.T) {
	const dir = "../../test/testdata/bundles/registry-v1/apiservice-operator-1.0.0"
	for _, tc := range []struct {
		golden string
		opts   Options
	}{
		{"apiservice-operator-1.0.0-own", Options{InstallNamespace: "apis", WatchNamespaces: []string{"apis"}}},
		{"apiservice-operator-1.0.0-cert-manager", Options{InstallNamespace: "apis", CertificateProvider: CertProviderCertManager}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			out, err := Convert(os.DirFS(dir), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := plain.Validate(out); err != nil {
				t.Fatalf("converted content is not valid plain+v0: %v", err)
			}
			checkGolden(t, filepath.Join("testdata", "golden", tc.golden+".yaml"), dump(t, out))
		})
	}
}
