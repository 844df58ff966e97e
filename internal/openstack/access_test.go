package openstack

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
)

// manilaStub is a Client whose Manila connection is already negotiated at microversion mv and
// points at srv.
func manilaStub(srv *httptest.Server, mv string) *Client {
	c := testClient()
	c.provider = &gophercloud.ProviderClient{HTTPClient: *srv.Client()}
	sc := &gophercloud.ServiceClient{ProviderClient: c.provider, Endpoint: srv.URL + "/v2/", Type: "sharev2", Microversion: mv}
	c.manila = &manilaConn{sc: sc, info: ManilaInfo{Endpoint: sc.Endpoint, MinVersion: "2.0", MaxVersion: mv, Microversion: mv}}
	return c
}

func TestAccessRules(t *testing.T) {
	const share = "0b0c0d0e-1111-4222-8333-444455556666"
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("X-OpenStack-Manila-API-Version")+" "+strings.TrimSpace(string(body)))
		switch {
		case strings.Contains(r.URL.RawQuery, "share_id=missing"):
			// What Manila answers for a share_id it does not know.
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"badRequest": {"code": 400, "message": "Share missing does not exist."}}`)
		case strings.Contains(r.URL.Path, "/missing"):
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"itemNotFound": {"code": 404, "message": "Share missing could not be found."}}`)
		case strings.Contains(r.URL.Path, "/forbidden") || strings.Contains(r.URL.RawQuery, "share_id=forbidden"):
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"forbidden": {"code": 403, "message": "Policy doesn't allow share_access_rule:index."}}`)
		case strings.Contains(r.URL.RawQuery, "share_id=bad"): // 400 for another reason: the share exists
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"badRequest": {"code": 400, "message": "Invalid input."}}`)
		case r.URL.Path == "/v2/shares/bad":
			_, _ = io.WriteString(w, `{"share": {"id": "bad"}}`)
		case r.Method == http.MethodGet:
			_, _ = io.WriteString(w, `{"access_list": [
				{"id": "r2", "share_id": "`+share+`", "access_type": "ip", "access_to": "10.196.0.0/16", "access_level": "rw", "state": "active",
				 "access_key": null, "created_at": "2026-01-02T03:04:05.000000", "updated_at": null, "metadata": {}},
				{"id": "r1", "share_id": "`+share+`", "access_type": "cephx", "access_to": "alice", "access_level": "rw", "state": "active",
				 "access_key": "AQBsecretkey==", "created_at": "2026-01-02T03:04:05.000000", "updated_at": null, "metadata": {}}]}`)
		default:
			_, _ = io.WriteString(w, `{"access_list": [
				{"id": "r3", "access_type": "ip", "access_to": "10.0.0.0/24", "access_level": "ro", "state": "new"}]}`)
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	c := manilaStub(srv, "2.73")
	rules, err := c.AccessRules(ctx, share)
	if err != nil {
		t.Fatal(err)
	}
	want := []AccessRule{{ID: "r1", Type: "cephx", To: "alice", Level: "rw", State: "active"}, {ID: "r2", Type: "ip", To: "10.196.0.0/16", Level: "rw", State: "active"}}
	if !slices.Equal(rules, want) {
		t.Errorf("2.73: %+v, want %+v", rules, want)
	}
	if len(got) != 1 || got[0] != "GET /v2/share-access-rules?share_id="+share+" 2.73 " {
		t.Errorf("2.73 requests: %q", got)
	}

	got = nil
	rules, err = manilaStub(srv, "2.40").AccessRules(ctx, share)
	if err != nil || !slices.Equal(rules, []AccessRule{{ID: "r3", Type: "ip", To: "10.0.0.0/24", Level: "ro", State: "new"}}) {
		t.Errorf("2.40: %+v %v", rules, err)
	}
	if len(got) != 1 || got[0] != "POST /v2/shares/"+share+"/action 2.40 {\"access_list\":null}" {
		t.Errorf("2.40 requests: %q", got)
	}

	for _, tt := range []struct {
		mv, id string
		kind   Kind
	}{{"2.73", "missing", KindNotFound}, {"2.40", "missing", KindNotFound}, {"2.73", "forbidden", KindForbidden}, {"2.73", "bad", KindServer}} {
		_, err := manilaStub(srv, tt.mv).AccessRules(ctx, tt.id)
		if KindOf(err) != tt.kind || !strings.Contains(fmtErr(err), "listing the access rules of share "+tt.id) {
			t.Errorf("%s %s: %v (%s), want %s", tt.mv, tt.id, err, KindOf(err), tt.kind)
		}
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
