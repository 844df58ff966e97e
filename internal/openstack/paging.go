package openstack

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/gophercloud/gophercloud/v2"
)

// manilaPageSize is used when Config.PageSize is zero: Manila caps some lists (share networks)
// at osapi_max_limit, 1000 by default, without a next link, so its lists always ask for pages.
const manilaPageSize = 1000

// idChunk bounds how many IDs go into one filtered request, to keep URLs short.
const idChunk = 50

// neutronList fetches every page of a Neutron collection, following "<key>_links" next links:
// one request per page, whatever the number of items.
func neutronList[T any](ctx context.Context, c *Client, cl call, path, key string, q url.Values) ([]T, error) {
	sc, err := c.neutronClient()
	if err != nil {
		return nil, err
	}
	if q == nil {
		q = url.Values{}
	}
	if c.pageSize > 0 {
		q.Set("limit", strconv.Itoa(c.pageSize))
	}
	next := sc.ServiceURL(path)
	if len(q) > 0 {
		next += "?" + q.Encode()
	}
	var out []T
	seen := map[string]bool{}
	for next != "" && !seen[next] {
		seen[next] = true
		var body map[string]json.RawMessage
		if _, err := sc.Get(ctx, next, &body, nil); err != nil {
			return nil, c.explain(cl, err)
		}
		var items []T
		if raw, ok := body[key]; ok {
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, c.explain(cl, err)
			}
		}
		out = append(out, items...)
		if len(items) == 0 {
			break
		}
		next = nextLink(body[key+"_links"])
	}
	return out, nil
}

func nextLink(raw json.RawMessage) string {
	var links []struct {
		Rel  string `json:"rel"`
		Href string `json:"href"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &links) != nil {
		return ""
	}
	for _, l := range links {
		if l.Rel == "next" {
			return l.Href
		}
	}
	return ""
}

// manilaList fetches every page of a Manila collection with limit/offset.
func manilaList[T any](ctx context.Context, c *Client, sc *gophercloud.ServiceClient, cl call, path, key string, q url.Values) ([]T, error) {
	if q == nil {
		q = url.Values{}
	}
	size := c.pageSize
	if size <= 0 {
		size = manilaPageSize
	}
	var out []T
	for offset := 0; ; {
		q.Set("limit", strconv.Itoa(size))
		q.Set("offset", strconv.Itoa(offset))
		var body map[string]json.RawMessage
		if _, err := sc.Get(ctx, sc.ServiceURL(path)+"?"+q.Encode(), &body, nil); err != nil {
			return nil, c.explain(cl, err)
		}
		var items []T
		if raw, ok := body[key]; ok {
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, c.explain(cl, err)
			}
		}
		out = append(out, items...)
		if len(items) < size {
			return out, nil
		}
		offset += len(items)
	}
}

// chunks splits ids into slices of at most n.
func chunks(ids []string, n int) [][]string {
	var out [][]string
	for len(ids) > n {
		out = append(out, ids[:n])
		ids = ids[n:]
	}
	if len(ids) > 0 {
		out = append(out, ids)
	}
	return out
}

// dedupe returns ids without repeats or empty strings, in their first order.
func dedupe(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
