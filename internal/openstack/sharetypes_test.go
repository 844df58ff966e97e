package openstack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// shareTypeList is a Manila answer to GET /types with n share types shaped as Manila 2.65 gives
// them (about 850 bytes each).
func shareTypeList(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"share_types":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id":"e311a088-9a2a-4eb9-9eba-e14045d5%04d","name":"type-%03d","extra_specs":{"driver_handles_share_servers":"False",`+
			`"snapshot_support":%t,"create_share_from_snapshot_support":%t,"revert_to_snapshot_support":false,"mount_snapshot_support":false},`+
			`"required_extra_specs":{"driver_handles_share_servers":"False"},"share_type_access:is_public":true,"description":null,"is_default":false}`, i, i, i%2 == 0, i%4 == 0)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func answer(body []byte, length int64) *http.Response {
	return &http.Response{Body: io.NopCloser(bytes.NewReader(body)), ContentLength: length,
		Request: &http.Request{URL: &url.URL{Scheme: "http", Host: "manila.example:8786", Path: "/v2/types"}}}
}

func TestDecodeBoundedReadsTheSummary(t *testing.T) {
	var got struct {
		ShareTypes []wireShareTypeSummary `json:"share_types"`
	}
	body := shareTypeList(3)
	if err := decodeBounded(answer(body, int64(len(body))), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.ShareTypes) != 3 || got.ShareTypes[1].Name != "type-001" || got.ShareTypes[0].ExtraSpecs.SnapshotSupport != true ||
		got.ShareTypes[1].ExtraSpecs.SnapshotSupport != false || got.ShareTypes[2].ExtraSpecs.DHSS != "False" ||
		got.ShareTypes[0].ExtraSpecs.CreateShareFromSnapshotSupport != true || got.ShareTypes[2].ExtraSpecs.CreateShareFromSnapshotSupport != false {
		t.Errorf("decoded %+v", got.ShareTypes)
	}
	// A length the server does not announce is read all the same.
	if err := decodeBounded(answer(body, -1), &got); err != nil || len(got.ShareTypes) != 3 {
		t.Errorf("without Content-Length: %v, %d types", err, len(got.ShareTypes))
	}
}

func TestDecodeBoundedRefusesAnEndlessAnswer(t *testing.T) {
	endless := io.MultiReader(strings.NewReader(`{"share_types":[`), zeros{})
	resp := &http.Response{Body: io.NopCloser(endless), ContentLength: -1,
		Request: &http.Request{URL: &url.URL{Scheme: "http", Host: "manila.example:8786", Path: "/v2/types"}}}
	var got any
	err := decodeBounded(resp, &got)
	if err == nil || !strings.Contains(err.Error(), "http://manila.example:8786/v2/types answered with more than 64 MiB") {
		t.Errorf("endless answer: %v", err)
	}
}

// zeros is an endless reader of spaces (valid JSON whitespace).
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// BenchmarkShareTypeList decodes Manila's answer for 200 share types (160 KB) as the CLI reads
// it (every extra spec) and as the operator reads it at every resync (the summary); "streamed" is
// how both read it before, through gophercloud's streaming decoder.
func BenchmarkShareTypeList(b *testing.B) {
	body := shareTypeList(200)
	b.Run("streamed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got struct {
				ShareTypes []wireShareType `json:"share_types"`
			}
			if err := json.NewDecoder(answer(body, int64(len(body))).Body).Decode(&got); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got struct {
				ShareTypes []wireShareType `json:"share_types"`
			}
			if err := decodeBounded(answer(body, int64(len(body))), &got); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("summary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got struct {
				ShareTypes []wireShareTypeSummary `json:"share_types"`
			}
			if err := decodeBounded(answer(body, int64(len(body))), &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
