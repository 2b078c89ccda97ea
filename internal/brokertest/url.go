package brokertest

import (
	"fmt"
	"net/url"
)

// urlHost returns the host:port of a broker URL.
func urlHost(v string) (string, error) {
	u, err := url.Parse(v)
	if err != nil {
		return "", err
	}
	if u.Host == "" || u.Port() == "" {
		return "", fmt.Errorf("want a URL with host and port, like scheme://127.0.0.1:1234")
	}
	return u.Host, nil
}
