// Package browser drives the monitor page (httpapi/monitor) in headless
// Chromium through chromedp, on a real generator and store: its tables,
// charts, search and the databases section, as an operator sees them. It
// lives in the e2e module so that chromedp stays out of the leaf module's
// requirements; scripts/services.sh installs the browser.
package browser
