package openstack

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/utils"
	"golang.org/x/sync/errgroup"
)

// Microversions this package speaks: it needs the export-locations API (2.9) and understands
// everything up to manilaNewest; older fields (share networks without subnets) are read too.
const (
	manilaOldest = "2.9"
	manilaNewest = "2.73"
	// manilaInlineExports is the last microversion whose share list still carries each share's
	// export paths: discovery reads all of them in O(pages) requests with it.
	manilaInlineExports = "2.8"
)

// ManilaServiceTypes are the catalog types of Manila's v2 API ("share" is the v1 API).
var ManilaServiceTypes = []string{"sharev2", "shared-file-system"}

// ManilaInfo is the Manila endpoint of the region and the API version negotiated with it.
type ManilaInfo struct {
	Endpoint     string `json:"endpoint"`
	MinVersion   string `json:"minVersion"`
	MaxVersion   string `json:"maxVersion"`
	Microversion string `json:"microversion"` // what this client uses: min(MaxVersion, manilaNewest)
}

// ShareType is a Manila share type with its extra specs.
type ShareType struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Public      bool              `json:"public"`
	ExtraSpecs  map[string]string `json:"extraSpecs"`
	// DHSS is driver_handles_share_servers: true means shares need a share network.
	DHSS            bool `json:"driverHandlesShareServers"`
	SnapshotSupport bool `json:"snapshotSupport"`
	// CreateShareFromSnapshotSupport: a share can be made from a snapshot of a share of this
	// type. The Manila CSI driver snapshots a share only when its type has both.
	CreateShareFromSnapshotSupport bool `json:"createShareFromSnapshotSupport"`
}

// ShareNetwork is a Manila share network: where DHSS=true back ends create share servers.
type ShareNetwork struct {
	ID      string               `json:"id"`
	Name    string               `json:"name,omitempty"`
	Subnets []ShareNetworkSubnet `json:"subnets"`
}

// ShareNetworkSubnet ties a share network to a Neutron network and subnet in an AZ.
type ShareNetworkSubnet struct {
	ID               string `json:"id,omitempty"`
	NeutronNetID     string `json:"neutronNetID,omitempty"`
	NeutronSubnetID  string `json:"neutronSubnetID,omitempty"`
	AvailabilityZone string `json:"availabilityZone,omitempty"`
}

// Share is a Manila share's metadata (never its data).
type Share struct {
	ID               string `json:"id"`
	Name             string `json:"name,omitempty"`
	Status           string `json:"status"`
	Protocol         string `json:"protocol"`
	ShareType        string `json:"shareType,omitempty"`
	ShareNetworkID   string `json:"shareNetworkID,omitempty"`
	AvailabilityZone string `json:"availabilityZone,omitempty"`
	// Size is in GiB.
	Size            int              `json:"size,omitempty"`
	ExportLocations []ExportLocation `json:"exportLocations,omitempty"`
}

// ExportLocation is where a share is mounted from.
type ExportLocation struct {
	Path      string `json:"path"`
	Preferred bool   `json:"preferred"`
	AdminOnly bool   `json:"adminOnly"`
}

// ShareFilter selects shares; empty fields do not filter.
type ShareFilter struct {
	Status string // e.g. "available"
	// ExportLocations also fetches each share's export locations: one request per share,
	// Concurrency at a time (default 8).
	ExportLocations bool
	Concurrency     int
}

type manilaConn struct {
	sc   *gophercloud.ServiceClient
	info ManilaInfo
}

type wireShareType struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	IsPublic    *bool          `json:"share_type_access:is_public"`
	ExtraSpecs  map[string]any `json:"extra_specs"` // strings, or booleans at newer microversions
}

// wireShareTypeSummary is a share type as ShareTypeSummaries reads it: the rest of the answer
// is skipped without being kept.
type wireShareTypeSummary struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	IsPublic   *bool  `json:"share_type_access:is_public"`
	ExtraSpecs struct {
		DHSS                           any `json:"driver_handles_share_servers"` // strings, or booleans at newer microversions
		SnapshotSupport                any `json:"snapshot_support"`
		CreateShareFromSnapshotSupport any `json:"create_share_from_snapshot_support"`
	} `json:"extra_specs"`
}

type wireShareNetwork struct {
	ID              string `json:"id"`
	Name            string `json:"name"`
	NeutronNetID    string `json:"neutron_net_id"`
	NeutronSubnetID string `json:"neutron_subnet_id"`
	Subnets         []struct {
		ID               string `json:"id"`
		NeutronNetID     string `json:"neutron_net_id"`
		NeutronSubnetID  string `json:"neutron_subnet_id"`
		AvailabilityZone string `json:"availability_zone"`
	} `json:"share_network_subnets"`
}

type wireShare struct {
	ID               string   `json:"id"`
	Name             string   `json:"name"`
	Status           string   `json:"status"`
	ShareProto       string   `json:"share_proto"`
	ShareType        string   `json:"share_type"`
	ShareTypeName    string   `json:"share_type_name"`
	ShareNetworkID   string   `json:"share_network_id"`
	AvailabilityZone string   `json:"availability_zone"`
	Size             int      `json:"size"`
	ExportLocations  []string `json:"export_locations"` // microversions up to 2.8 only
}

// wireShareRules is a share as SharesWithRulesNotActive reads it: the rest of the answer is
// skipped without being kept.
type wireShareRules struct {
	ID                string `json:"id"`
	AccessRulesStatus string `json:"access_rules_status"` // microversion 2.10 and later
}

type wireExportLocation struct {
	Path        string `json:"path"`
	Preferred   bool   `json:"preferred"`
	IsAdminOnly bool   `json:"is_admin_only"`
}

// ManilaAvailable reports whether the Keystone catalog has Manila's v2 API in the client's
// region. It makes no request: this is how "no Manila" looks to OpenStack clients.
func (c *Client) ManilaAvailable() bool { return c.HasService(ManilaServiceTypes...) }

// Manila returns the Manila endpoint and the negotiated microversion. Without Manila in the
// catalog the error is KindNoEndpoint: "Manila is not available in region X". One request,
// the first time only.
func (c *Client) Manila(ctx context.Context) (ManilaInfo, error) {
	m, err := c.manilaConn(ctx)
	if err != nil {
		return ManilaInfo{}, err
	}
	return m.info, nil
}

func (c *Client) manilaConn(ctx context.Context) (*manilaConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.manila != nil {
		return c.manila, nil
	}
	endpoint, err := c.endpoint(ManilaServiceTypes...)
	if err != nil {
		return nil, &Error{Kind: KindNoEndpoint, Service: "Manila", Message: c.noEndpointMessage("Manila"), err: err}
	}
	sc := &gophercloud.ServiceClient{ProviderClient: c.provider, Endpoint: endpoint, Type: "sharev2"}
	info, err := c.negotiate(ctx, sc)
	if err != nil {
		return nil, err
	}
	sc.Microversion = info.Microversion
	c.manila = &manilaConn{sc: sc, info: info}
	return c.manila, nil
}

// negotiate reads Manila's version document and picks the newest microversion both sides know.
func (c *Client) negotiate(ctx context.Context, sc *gophercloud.ServiceClient) (ManilaInfo, error) {
	cl := call{service: "Manila", what: "asking Manila for its API versions"}
	base, err := utils.BaseVersionedEndpoint(sc.Endpoint)
	if err != nil {
		return ManilaInfo{}, c.explain(cl, err)
	}
	var doc struct {
		Versions []struct {
			ID         string `json:"id"`
			Status     string `json:"status"`
			Version    string `json:"version"`
			MinVersion string `json:"min_version"`
		} `json:"versions"`
	}
	if _, err := c.provider.Request(ctx, "GET", gophercloud.NormalizeURL(base), &gophercloud.RequestOpts{
		JSONResponse: &doc, OkCodes: []int{200, 300},
	}); err != nil {
		return ManilaInfo{}, c.explain(cl, err)
	}
	info := ManilaInfo{Endpoint: sc.Endpoint}
	for _, v := range doc.Versions {
		if strings.HasPrefix(v.ID, "v2") && v.Version != "" {
			info.MinVersion, info.MaxVersion = v.MinVersion, v.Version
		}
	}
	if info.MaxVersion == "" {
		return ManilaInfo{}, &Error{Kind: KindServer, Service: "Manila", Message: fmt.Sprintf(
			"asking Manila for its API versions: %s does not announce a v2 API with microversions; manila-setup needs Manila's v2 API (microversion %s or newer)", base, manilaOldest)}
	}
	if versionLess(info.MaxVersion, manilaOldest) {
		return ManilaInfo{}, &Error{Kind: KindServer, Service: "Manila", Message: fmt.Sprintf(
			"Manila at %s supports API microversions up to %s; manila-setup needs %s or newer", sc.Endpoint, info.MaxVersion, manilaOldest)}
	}
	info.Microversion = info.MaxVersion
	if versionLess(manilaNewest, info.MaxVersion) {
		info.Microversion = manilaNewest
	}
	return info, nil
}

// versionLess compares microversions "2.9" < "2.10".
func versionLess(a, b string) bool {
	am, an, _ := utils.ParseMicroversion(a)
	bm, bn, _ := utils.ParseMicroversion(b)
	return am < bm || (am == bm && an < bn)
}

// ShareTypes returns the share types the project may use: public ones and private ones shared
// with it, with their extra specs. One request.
func (c *Client) ShareTypes(ctx context.Context) ([]ShareType, error) {
	return listShareTypes(ctx, c, func(w wireShareType) ShareType {
		st := ShareType{ID: w.ID, Name: w.Name, Description: w.Description, Public: w.IsPublic == nil || *w.IsPublic, ExtraSpecs: map[string]string{}}
		for k, v := range w.ExtraSpecs {
			st.ExtraSpecs[k] = fmt.Sprint(v)
		}
		st.DHSS = specTrue(st.ExtraSpecs["driver_handles_share_servers"])
		st.SnapshotSupport = specTrue(st.ExtraSpecs["snapshot_support"])
		st.CreateShareFromSnapshotSupport = specTrue(st.ExtraSpecs["create_share_from_snapshot_support"])
		return st
	})
}

// ShareTypeSummaries is ShareTypes without descriptions and extra specs (ExtraSpecs is nil; DHSS,
// SnapshotSupport and CreateShareFromSnapshotSupport are read): what the operator asks for at every resync. Decoding into the
// narrower shape allocates a quarter as much (BenchmarkShareTypeList).
func (c *Client) ShareTypeSummaries(ctx context.Context) ([]ShareType, error) {
	return listShareTypes(ctx, c, func(w wireShareTypeSummary) ShareType {
		return ShareType{ID: w.ID, Name: w.Name, Public: w.IsPublic == nil || *w.IsPublic,
			DHSS: specTrue(fmt.Sprint(w.ExtraSpecs.DHSS)), SnapshotSupport: specTrue(fmt.Sprint(w.ExtraSpecs.SnapshotSupport)),
			CreateShareFromSnapshotSupport: specTrue(fmt.Sprint(w.ExtraSpecs.CreateShareFromSnapshotSupport))}
	})
}

// listShareTypes asks Manila for the share types once and converts each from its wire shape W,
// sorted by name.
func listShareTypes[W any](ctx context.Context, c *Client, convert func(W) ShareType) ([]ShareType, error) {
	m, err := c.manilaConn(ctx)
	if err != nil {
		return nil, err
	}
	cl := call{service: "Manila", what: "listing share types"}
	resp, err := m.sc.Get(ctx, m.sc.ServiceURL("types")+"?is_public=all", nil, &gophercloud.RequestOpts{KeepResponseBody: true})
	if err != nil {
		return nil, c.explain(cl, err)
	}
	var body struct {
		ShareTypes []W `json:"share_types"`
	}
	if err := decodeBounded(resp, &body); err != nil {
		return nil, c.explain(cl, err)
	}
	out := make([]ShareType, 0, len(body.ShareTypes))
	for _, w := range body.ShareTypes {
		out = append(out, convert(w))
	}
	slices.SortFunc(out, func(a, b ShareType) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// maxListAnswer bounds an answer read whole: 200 share types are 171 KB.
const maxListAnswer = 64 << 20

// decodeBounded reads a JSON answer whole, into one buffer of its announced length (a streaming
// decoder grows its buffer by doubling, which was most of what a share type list allocated),
// and decodes it. An answer longer than maxListAnswer is refused.
func decodeBounded(resp *http.Response, into any) error {
	defer resp.Body.Close()
	var buf bytes.Buffer
	if resp.ContentLength > 0 && resp.ContentLength <= maxListAnswer {
		buf.Grow(int(resp.ContentLength) + bytes.MinRead) // ReadFrom wants MinRead free to stop
	}
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, maxListAnswer+1)); err != nil {
		return err
	}
	if buf.Len() > maxListAnswer {
		where := "the server"
		if resp.Request != nil {
			where = resp.Request.URL.Redacted()
		}
		return &Error{Kind: KindServer, Message: fmt.Sprintf("%s answered with more than %d MiB", where, maxListAnswer>>20)}
	}
	return json.Unmarshal(buf.Bytes(), into)
}

// specTrue reads Manila's boolean extra specs: "True", "true", "<is> True".
func specTrue(v string) bool {
	v = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "<is>"))
	b, _ := strconv.ParseBool(strings.ToLower(v))
	return b
}

// ShareNetworks returns the project's share networks with their Neutron networks. A cloud
// whose policy forbids it answers 403 (KindForbidden). One request per page.
func (c *Client) ShareNetworks(ctx context.Context) ([]ShareNetwork, error) {
	m, err := c.manilaConn(ctx)
	if err != nil {
		return nil, err
	}
	cl := call{service: "Manila", what: "listing share networks"}
	wires, err := manilaList[wireShareNetwork](ctx, c, m.sc, cl, "share-networks/detail", "share_networks", nil)
	if err != nil {
		return nil, err
	}
	out := make([]ShareNetwork, 0, len(wires))
	for _, w := range wires {
		sn := ShareNetwork{ID: w.ID, Name: w.Name}
		for _, s := range w.Subnets {
			sn.Subnets = append(sn.Subnets, ShareNetworkSubnet{ID: s.ID, NeutronNetID: s.NeutronNetID, NeutronSubnetID: s.NeutronSubnetID, AvailabilityZone: s.AvailabilityZone})
		}
		if len(sn.Subnets) == 0 && w.NeutronNetID != "" { // microversions before 2.51
			sn.Subnets = []ShareNetworkSubnet{{NeutronNetID: w.NeutronNetID, NeutronSubnetID: w.NeutronSubnetID}}
		}
		out = append(out, sn)
	}
	slices.SortFunc(out, func(a, b ShareNetwork) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	return out, nil
}

// Shares returns the project's shares (metadata only), optionally with export locations.
// Requests: one per page, plus one per share with f.ExportLocations.
func (c *Client) Shares(ctx context.Context, f ShareFilter) ([]Share, error) {
	m, err := c.manilaConn(ctx)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	wires, err := manilaList[wireShare](ctx, c, m.sc, call{service: "Manila", what: "listing shares"}, "shares/detail", "shares", q)
	if err != nil {
		return nil, err
	}
	shares := make([]Share, 0, len(wires))
	for _, w := range wires {
		shares = append(shares, shareFromWire(w))
	}
	if f.ExportLocations {
		err := forEach(ctx, len(shares), f.Concurrency, func(ctx context.Context, i int) error {
			if shares[i].Status != "available" {
				return nil
			}
			locs, err := c.ExportLocations(ctx, shares[i].ID)
			if IsNotFound(err) { // deleted meanwhile
				return nil
			}
			shares[i].ExportLocations = locs
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return shares, nil
}

func shareFromWire(w wireShare) Share {
	return Share{ID: w.ID, Name: w.Name, Status: w.Status, Protocol: strings.ToUpper(w.ShareProto),
		ShareType: coalesce(w.ShareTypeName, w.ShareType), ShareNetworkID: w.ShareNetworkID, AvailabilityZone: w.AvailabilityZone, Size: w.Size}
}

// SharesWithRulesNotActive lists the project's shares whose access rules are not all applied,
// share ID to Manila's access_rules_status: "error" (a rule failed) or "syncing" (rules queued
// or being applied). Manila sums up each share's rules in that field, so one list of the
// shares, read for those two fields only, answers for all of them: one request per page.
func (c *Client) SharesWithRulesNotActive(ctx context.Context) (map[string]string, error) {
	m, err := c.manilaConn(ctx)
	if err != nil {
		return nil, err
	}
	wires, err := manilaList[wireShareRules](ctx, c, m.sc, call{service: "Manila", what: "listing shares"}, "shares/detail", "shares", nil)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, w := range wires {
		// "" is a Manila older than 2.10, which does not say.
		if w.AccessRulesStatus != "" && w.AccessRulesStatus != "active" {
			out[w.ID] = w.AccessRulesStatus
		}
	}
	return out, nil
}

// Share returns one share, with its export locations once it is available. A share that does
// not exist or that the project cannot see is KindNotFound. Two requests (one while the share
// is not available).
func (c *Client) Share(ctx context.Context, id string) (Share, error) {
	m, err := c.manilaConn(ctx)
	if err != nil {
		return Share{}, err
	}
	cl := call{service: "Manila", what: "reading share " + id, id: id, idKind: "share"}
	var body struct {
		Share wireShare `json:"share"`
	}
	if _, err := m.sc.Get(ctx, m.sc.ServiceURL("shares", id), &body, nil); err != nil {
		return Share{}, c.explain(cl, err)
	}
	s := shareFromWire(body.Share)
	if s.Status == "available" {
		if s.ExportLocations, err = c.ExportLocations(ctx, id); err != nil {
			return s, err
		}
	}
	return s, nil
}

// ExportLocations returns the export locations of one share that the caller may see (Manila
// hides admin-only ones from non-admins). One request.
func (c *Client) ExportLocations(ctx context.Context, shareID string) ([]ExportLocation, error) {
	m, err := c.manilaConn(ctx)
	if err != nil {
		return nil, err
	}
	cl := call{service: "Manila", what: "listing the export locations of share " + shareID, id: shareID, idKind: "share"}
	var body struct {
		ExportLocations []wireExportLocation `json:"export_locations"`
	}
	if _, err := m.sc.Get(ctx, m.sc.ServiceURL("shares", shareID, "export_locations"), &body, nil); err != nil {
		return nil, c.explain(cl, err)
	}
	out := make([]ExportLocation, 0, len(body.ExportLocations))
	for _, e := range body.ExportLocations {
		out = append(out, ExportLocation{Path: e.Path, Preferred: e.Preferred, AdminOnly: e.IsAdminOnly})
	}
	return out, nil
}

// sharesWithInlineExports lists available shares with their export paths in one request per
// page, using the last microversion whose share list carries them. It returns ok=false when the
// server no longer supports that microversion.
func (c *Client) sharesWithInlineExports(ctx context.Context) (shares []Share, paths map[string][]string, ok bool, err error) {
	m, err := c.manilaConn(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	if versionLess(manilaInlineExports, m.info.MinVersion) {
		return nil, nil, false, nil
	}
	old := *m.sc
	old.Microversion = manilaInlineExports
	wires, err := manilaList[wireShare](ctx, c, &old, call{service: "Manila", what: "listing shares"}, "shares/detail", "shares", url.Values{"status": {"available"}})
	if err != nil {
		return nil, nil, false, err
	}
	paths = map[string][]string{}
	for _, w := range wires {
		shares = append(shares, shareFromWire(w))
		paths[w.ID] = w.ExportLocations
	}
	return shares, paths, true, nil
}

// forEach runs fn for 0..n-1 with at most limit at a time and returns the first error; the
// others are canceled through ctx.
func forEach(ctx context.Context, n, limit int, fn func(context.Context, int) error) error {
	if limit <= 0 {
		limit = 8
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i := 0; i < n && gctx.Err() == nil; i++ {
		g.Go(func() error { return fn(gctx, i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return context.Cause(ctx) // nil unless the caller's context ended before all ran
}
