package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"

	"github.com/rukpak-dev/rukpak/unpack"
)

// CatalogClient reads the catalogs a provisioner process serves, from any
// process: what a BundleDeployment's catalog source resolves against.
//
// As with FallbackLoader, nothing about the request comes from a Catalog's
// status, which anyone with catalogs/status may write: the URL is BaseURL
// (configuration) plus the catalog's and the package's names, the server
// must present a certificate Client trusts, redirects are not followed,
// and the token sent is bound to the content audience.
type CatalogClient struct {
	// BaseURL is the content service that serves Catalogs,
	// https://host[:port][/prefix]; package P of catalog C is
	// <BaseURL>/catalogs/C/packages/P.jsonl.
	BaseURL string
	// Client must trust the content service's CA (see NewHTTPClient).
	Client *http.Client
	// Token returns the bearer token to send, for each request.
	Token func() (string, error)
	// Audience, when set, must be among the token's audiences, or the
	// token is not sent (and nothing is read).
	Audience string
	// Local, when set, is the store of this process: a catalog it holds is
	// read from it, with no request (the process that serves catalogs
	// reads them as it serves them, and needs no token for its own).
	Local *CatalogStore
}

// PackageURL is where package pkg of catalog name is served.
func (c *CatalogClient) PackageURL(name, pkg string) (string, error) {
	base, err := contentBase(c.BaseURL)
	if err != nil {
		return "", err
	}
	if err := validBundleName(name); err != nil {
		return "", fmt.Errorf("catalog name: %w", err)
	}
	return base + CatalogsPath + name + "/packages/" + url.PathEscape(pkg) + ".jsonl", nil
}

// OpenPackage requests package pkg of catalog name and returns the
// response body, which the caller bounds and closes. A package the catalog
// does not have is an error wrapping fs.ErrNotExist.
func (c *CatalogClient) OpenPackage(ctx context.Context, name, pkg string) (io.ReadCloser, error) {
	if c.Local != nil {
		rc, err := c.Local.OpenPackage(name, pkg)
		if !errors.Is(err, errCatalogNotStored) {
			return rc, err
		}
	}
	u, err := c.PackageURL(name, pkg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	if c.Token != nil {
		token, err := c.Token()
		if err != nil {
			// Not wrapped: a missing token file is no missing package.
			return nil, errors.New("getting bearer token: " + err.Error())
		}
		if c.Audience != "" {
			if err := checkAudience(token, c.Audience); err != nil {
				return nil, err
			}
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := http.Client{Transport: http.DefaultTransport}
	if c.Client != nil {
		client = *c.Client
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", u, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return resp.Body, nil
	case http.StatusNotFound:
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %w", u, fs.ErrNotExist)
	}
	defer resp.Body.Close()
	return nil, fmt.Errorf("reading %s: server answered %s: %s", u, resp.Status, unpack.Excerpt(resp.Body))
}
