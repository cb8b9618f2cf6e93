#!/usr/bin/env python3
"""Checks sync-server's admin dashboard (GET /dashboard) in a real browser: headless Chromium through Selenium 4.

  scripts/dashboard-browser-check.py --url http://127.0.0.1:8080 --admin-token ADMIN --device-token DEVICE \
      --expect team-a=120 --expect-replica team-a=REPLICA_ID:100 --screenshot dashboard.png \
      [--then-expect-file PATH] [--timeout 30]

Steps, one line each on stdout; the first failure prints "FAIL: ..." and exits 1 (2 for bad arguments):
 1. without a credential GET /dashboard and GET /v1/admin/status answer 401 (with a Basic challenge); with the
    device token as a bearer token, 403.
 2. headless Chromium (/usr/bin/chromium, /usr/bin/chromedriver) sends the admin token on every request
    (CDP Network.setExtraHTTPHeaders) and opens /dashboard.
 3. every --expect SCOPE=COUNT row shows COUNT events (found with the page's search box); each scope of an
    --expect-replica SCOPE=REPLICA_ID:ACKNOWLEDGED is clicked, and its replica row shows ACKNOWLEDGED.
 4. --screenshot PATH: a PNG of the whole page.
 5. --then-expect-file PATH: prints READY, waits for PATH (lines SCOPE=COUNT, written after the caller pushed
    more events), then waits, without reloading the page, until the rows show the new counts; the rows already
    on screen must get there by the page's own polling. "updated" must have changed and no navigation happened.
 6. the browser console holds no SEVERE entry from the page, and no request left the server's origin.
 7. prints OK.
Needs Python 3.11 and Selenium 4 (pip install selenium).
"""
import argparse
import base64
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


class CheckFailed(Exception):
    pass


def step(message):
    print(message, flush=True)


def fail(message):
    raise CheckFailed(message)


# ------------------------------------------------------------------------------------------------ arguments

def parse_count(text, option):
    scope, sep, count = text.rpartition("=")
    if not sep or not scope or not count.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{option} wants SCOPE=COUNT, not {text!r}")
    return scope.strip(), int(count)


def parse_expect(text):
    return parse_count(text, "--expect")


def parse_expect_replica(text):
    scope, sep, rest = text.partition("=")
    replica, sep2, ack = rest.rpartition(":")
    if not sep or not sep2 or not scope or not replica or not ack.strip().isdigit():
        raise argparse.ArgumentTypeError(
            f"--expect-replica wants SCOPE=REPLICA_ID:ACKNOWLEDGED, not {text!r}")
    return scope.strip(), replica.strip(), int(ack)


def arguments():
    parser = argparse.ArgumentParser(description="Check sync-server's admin dashboard in headless Chromium.")
    parser.add_argument("--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--admin-token", required=True)
    parser.add_argument("--device-token", help="a device's valid token: the admin API must answer it 403")
    parser.add_argument("--expect", action="append", default=[], type=parse_expect, metavar="SCOPE=COUNT")
    parser.add_argument("--expect-replica", action="append", default=[], type=parse_expect_replica,
                        metavar="SCOPE=REPLICA_ID:ACKNOWLEDGED")
    parser.add_argument("--screenshot", metavar="PATH", help="save a PNG of the whole page there")
    parser.add_argument("--then-expect-file", metavar="PATH",
                        help="after READY, wait for this file of SCOPE=COUNT lines and for the page to show them")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds each wait may take (default 30)")
    args = parser.parse_args()
    parsed = urllib.parse.urlsplit(args.url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        parser.error(f"--url must be an http(s) URL, not {args.url!r}")
    args.base = f"{parsed.scheme}://{parsed.netloc}"
    return args


# ------------------------------------------------------------------------------------------------ step 1: HTTP

def http_status(url, authorization=None, timeout=10.0):
    request = urllib.request.Request(url, method="GET")
    if authorization:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
            return response.status, response.headers
    except urllib.error.HTTPError as error:
        error.read()
        return error.code, error.headers
    except (urllib.error.URLError, OSError) as error:
        fail(f"GET {url}: the server is unreachable ({error})")


def check_credentials(args):
    for path in ("/dashboard", "/v1/admin/status"):
        status, headers = http_status(args.base + path)
        if status != 401:
            fail(f"GET {path} without a credential answered {status}, not 401")
        challenge = headers.get("WWW-Authenticate", "")
        # The page's challenge is what makes a browser ask a person for the password.
        if path == "/dashboard" and not challenge.lower().startswith("basic"):
            fail(f"GET {path} without a credential answered 401 without a Basic challenge "
                 f"(WWW-Authenticate: {challenge!r})")
        step(f"step 1: GET {path} without a credential -> 401" + (f" ({challenge})" if challenge else ""))
    if args.device_token:
        for path in ("/dashboard", "/v1/admin/status"):
            status, _ = http_status(args.base + path, "Bearer " + args.device_token)
            if status != 403:
                fail(f"GET {path} with the device token answered {status}, not 403")
            step(f"step 1: GET {path} with the device token -> 403")
    else:
        step("step 1: no --device-token given: the 403 check is skipped")
    status, _ = http_status(args.base + "/v1/admin/status", "Bearer " + args.admin_token)
    if status != 200:
        fail(f"GET /v1/admin/status with the admin token answered {status}, not 200")
    step("step 1: GET /v1/admin/status with the admin token -> 200")


# ------------------------------------------------------------------------------------------------ the browser

def start_browser(args):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        fail("Selenium 4 is not installed (pip install selenium)")
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            fail(f"{path} is missing (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--no-first-run", "--no-default-browser-check",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-extensions", "--disable-default-apps", "--lang=en-US"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    except Exception as error:  # noqa: BLE001 - any start failure is the check's failure
        fail(f"could not start Chromium through chromedriver: {str(error).splitlines()[0]}")
    return driver


def page_state(driver):
    """A one-line description of what the page shows, for failure messages."""
    try:
        return driver.execute_script("""
            const t = (id) => { const e = document.getElementById(id); return e && !e.hidden ? e.textContent.trim() : ''; };
            return 'connection: ' + (t('connection') || '?') + '; ' + (t('updated-at') || '?') +
                (t('alert') ? '; alert: ' + t('alert') : '');""")
    except Exception:  # noqa: BLE001
        return "page state unavailable"


def wait_until(driver, timeout, probe, what):
    """Calls probe() until it returns (True, detail); fails with the last detail after timeout seconds."""
    deadline = time.monotonic() + timeout
    detail = ""
    while True:
        done, detail = probe()
        if done:
            return detail
        if time.monotonic() >= deadline:
            fail(f"{what}: not within {timeout:g} s ({detail}; {page_state(driver)})")
        time.sleep(0.2)


ROW_VALUE_JS = """
    const [scope, field] = arguments;
    const body = document.getElementById('scopes-body');
    if (!body) return {error: 'the page has no #scopes-body'};
    const row = Array.from(body.querySelectorAll('tr[data-scope]')).find((r) => r.getAttribute('data-scope') === scope);
    const search = document.getElementById('scope-search');
    if (!row) return {found: false, search: search ? search.value : null, rows: body.children.length};
    const cell = row.querySelector('[data-field="' + field + '"]');
    return {found: true, value: cell ? cell.getAttribute('data-value') : null, text: cell ? cell.textContent : null};
"""


def row_value(driver, scope, field="head"):
    return driver.execute_script(ROW_VALUE_JS, scope, field)


def search_for(driver, scope):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    box = driver.find_element(By.ID, "scope-search")
    if box.get_attribute("value") == scope:
        return
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", box)
    box.click()
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)
    if scope:
        box.send_keys(scope)
    if box.get_attribute("value") != scope:
        fail(f"could not type {scope!r} into the search box")


def wait_for_count(driver, scope, count, timeout, use_search=True):
    if use_search:
        search_for(driver, scope)

    def probe():
        info = row_value(driver, scope)
        if info.get("error"):
            fail(info["error"])
        if not info["found"]:
            return False, f"no row for scope {scope!r} (search {info.get('search')!r}, {info.get('rows')} rows)"
        value = info.get("value")
        if value is not None and value.isdigit() and int(value) == count:
            return True, info.get("text")
        return False, f"scope {scope!r} shows {value!r} events, not {count}"

    return wait_until(driver, timeout, probe, f"scope {scope} showing {count} events")


def click_fresh(driver, find, what, timeout):
    """Clicks the element find() returns, finding it again when the page replaced it between the find and the
    click: the tables are rendered anew on every poll, so a reference can go stale at any moment."""
    from selenium.common.exceptions import StaleElementReferenceException
    deadline = time.monotonic() + timeout
    while True:
        try:
            element = find()
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)
            element.click()
            return
        except StaleElementReferenceException:
            if time.monotonic() >= deadline:
                fail(f"{what}: replaced by the page at every try for {timeout:g} s")
            time.sleep(0.1)


def check_replica(driver, scope, replica, acknowledged, timeout):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    find_row = ("return Array.from(document.querySelectorAll('#scopes-body tr[data-scope]'))"
                ".find((r) => r.getAttribute('data-scope') === arguments[0]) || null;")
    # Searched for even when its row is on screen: a search typed before may not have been answered yet, and
    # its answer would take the row away.
    search_for(driver, scope)
    wait_until(driver, timeout, lambda: (row_value(driver, scope)["found"], f"no row for scope {scope!r}"),
               f"scope {scope} in the table")

    def scope_cell():
        row = driver.execute_script(find_row, scope)
        if row is None:
            raise StaleElementReferenceException(f"the row of scope {scope} is gone")
        return row.find_element(By.CSS_SELECTOR, '[data-field="scope"]')

    click_fresh(driver, scope_cell, f"the row of scope {scope}", timeout)

    def probe():
        info = driver.execute_script("""
            const [scope, replica] = arguments;
            const section = document.getElementById('replicas');
            if (!section) return {error: 'the page has no #replicas'};
            if (section.getAttribute('data-scope') !== scope || section.hidden)
                return {selected: section.getAttribute('data-scope'), hidden: section.hidden};
            const rows = Array.from(section.querySelectorAll('tr[data-replica]'));
            const row = rows.find((r) => r.getAttribute('data-replica') === replica);
            const next = document.getElementById('replicas-next');
            const total = document.getElementById('replicas-total');
            const result = {selected: scope, rows: rows.length, nextEnabled: !!next && !next.disabled,
                            total: total ? total.getAttribute('data-value') : null};
            if (row) {
                const cell = row.querySelector('[data-field="acknowledged"]');
                result.found = true;
                result.value = cell ? cell.getAttribute('data-value') : null;
            }
            return result;""", scope, replica)
        if info.get("error"):
            fail(info["error"])
        if info.get("selected") != scope:
            return False, f"the replicas section shows {info.get('selected')!r}, not {scope!r}"
        if info.get("found"):
            value = info.get("value")
            if value is not None and value.isdigit() and int(value) == acknowledged:
                return True, value
            return False, f"replica {replica} shows acknowledged {value!r}, not {acknowledged}"
        if info.get("rows") and info.get("nextEnabled"):
            try:
                driver.find_element(By.ID, "replicas-next").click()  # not on this page of replicas: the next one
            except StaleElementReferenceException:
                pass  # re-rendered meanwhile: the next probe looks again
            return False, f"replica {replica} not on this page, going to the next"
        return False, f"no row for replica {replica} ({info.get('rows')} rows of {info.get('total')})"

    wait_until(driver, timeout, probe, f"replica {replica} of {scope} showing acknowledged {acknowledged}")


def save_screenshot(driver, path):
    """The whole page, not only the window."""
    try:
        driver.execute_script("window.scrollTo(0, 0);")
        metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
        data = base64.b64decode(shot["data"])
    except Exception:  # noqa: BLE001 - fall back to the window
        data = driver.get_screenshot_as_png()
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def read_expect_file(path):
    expected = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                expected.append(parse_count(line, path))
            except argparse.ArgumentTypeError:
                fail(f"{path} line {number}: {line!r} is not SCOPE=COUNT")
    return expected


def show_for_polling(driver, args):
    """Before READY: the table as a person leaves it (search cleared), or, when that page does not hold the
    --expect scopes, searching the first of them: the rows on screen then must change by polling alone."""
    if not args.expect:
        return
    search_for(driver, "")
    scopes = [s for s, _ in args.expect]
    deadline = time.monotonic() + min(5.0, args.timeout)
    while time.monotonic() < deadline:
        if all(row_value(driver, s).get("found") for s in scopes):
            return
        time.sleep(0.2)
    search_for(driver, scopes[0])
    wait_until(driver, args.timeout, lambda: (row_value(driver, scopes[0]).get("found"), "not shown"),
               f"scope {scopes[0]} in the table")


def then_expect(driver, args):
    show_for_polling(driver, args)
    driver.execute_script("window.__noReload = 1;")
    before = driver.execute_script("""
        const u = document.getElementById('updated-at');
        return {ts: u ? u.getAttribute('data-ts') : null, text: u ? u.textContent : null,
                origin: performance.timeOrigin, navigations: performance.getEntriesByType('navigation').length};""")
    print("READY", flush=True)
    deadline = time.monotonic() + args.timeout
    while not os.path.exists(args.then_expect_file):
        if time.monotonic() >= deadline:
            fail(f"{args.then_expect_file} did not appear within {args.timeout:g} s")
        time.sleep(0.1)
    time.sleep(0.1)  # the writer may not have closed it yet
    expected = read_expect_file(args.then_expect_file)
    if not expected:
        fail(f"{args.then_expect_file} holds no SCOPE=COUNT line")
    step(f"step 5: {args.then_expect_file} appeared: " + ", ".join(f"{s}={c}" for s, c in expected))
    # The rows on screen must get there by the page's own polling: no typing first.
    on_screen = [(s, c) for s, c in expected if row_value(driver, s).get("found")]
    others = [(s, c) for s, c in expected if (s, c) not in on_screen]
    for scope, count in on_screen:
        wait_for_count(driver, scope, count, args.timeout, use_search=False)
        step(f"step 5: scope {scope} shows {count} events (updated by polling, no reload)")
    for scope, count in others:
        wait_for_count(driver, scope, count, args.timeout)
        step(f"step 5: scope {scope} shows {count} events (found with the search box, no reload)")
    after = driver.execute_script("""
        const u = document.getElementById('updated-at');
        return {marker: window.__noReload, ts: u ? u.getAttribute('data-ts') : null, text: u ? u.textContent : null,
                origin: performance.timeOrigin, navigations: performance.getEntriesByType('navigation').length};""")
    if after.get("marker") != 1 or after.get("origin") != before.get("origin"):
        fail("the page was reloaded or navigated away (window.__noReload is gone)")
    if after.get("navigations") != before.get("navigations"):
        fail("a navigation happened while waiting for the new counts")
    if (after.get("ts"), after.get("text")) == (before.get("ts"), before.get("text")):
        fail(f"#updated-at did not change ({before.get('text')!r})")
    step(f"step 5: no reload; #updated-at went from {before.get('text')!r} to {after.get('text')!r}")


def check_console_and_origin(driver, args):
    entries = driver.get_log("browser")
    page_prefix = args.base + "/"
    severe = []
    noted = []
    for entry in entries:
        if entry.get("level") != "SEVERE":
            continue
        message = entry.get("message", "")
        source = entry.get("source", "")
        # The page's own scripts: exceptions, console.error, policy violations, or anything naming its files.
        if source in ("javascript", "console-api", "security") or (page_prefix + "dashboard") in message:
            severe.append(f"[{source}] {message}")
        else:
            noted.append(f"[{source}] {message}")
    for line in noted:
        step(f"step 6: note, a SEVERE browser entry not from the page: {line[:300]}")
    if severe:
        fail("the browser console holds SEVERE entries from the page: " + " | ".join(s[:300] for s in severe))
    step(f"step 6: browser console: no SEVERE entry from the page ({len(entries)} entries)")

    names = driver.execute_script(
        "return performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))"
        ".map((e) => e.name);")
    foreign = [n for n in names if not n.startswith(page_prefix)]
    if foreign:
        fail("requests left the server's origin: " + ", ".join(sorted(set(foreign))[:10]))
    # Every request the browser made (Resource Timing keeps a bounded number): the DevTools network log.
    requested = set()
    for entry in driver.get_log("performance"):
        try:
            message = json.loads(entry["message"])["message"]
        except (KeyError, ValueError, TypeError):
            continue
        if message.get("method") == "Network.requestWillBeSent":
            requested.add(message["params"]["request"]["url"])
    foreign = [u for u in requested if not u.startswith(page_prefix) and not u.startswith("data:")]
    if foreign:
        fail("requests left the server's origin: " + ", ".join(sorted(foreign)[:10]))
    step(f"step 6: every request stayed on {args.base} ({len(names)} timing entries, {len(requested)} distinct URLs)")


def run_browser(args):
    driver = start_browser(args)
    try:
        driver.set_page_load_timeout(args.timeout)
        # Keep every resource timing entry (the default buffer holds 250, about a minute of polling).
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {
            "source": "try { performance.setResourceTimingBufferSize(1000000); } catch (e) {}"})
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setExtraHTTPHeaders",
                               {"headers": {"Authorization": "Bearer " + args.admin_token}})
        step("step 2: headless Chromium started; the admin token goes as a bearer token on every request")
        driver.get(args.base + "/dashboard")
        title = driver.title
        if not driver.execute_script("return !!document.getElementById('scopes-body');"):
            fail(f"GET /dashboard in the browser did not show the dashboard (title {title!r})")
        step(f"step 2: opened {args.base}/dashboard ({title})")

        wait_until(driver, args.timeout, lambda: (
            driver.execute_script("return document.getElementById('connection').getAttribute('data-state');")
            == "live", "the page is not live"), "the page going live")
        step(f"step 3: the page is live ({page_state(driver)})")
        for scope, count in args.expect:
            wait_for_count(driver, scope, count, args.timeout)
            step(f"step 3: scope {scope} shows {count} events")
        for scope, replica, acknowledged in args.expect_replica:
            check_replica(driver, scope, replica, acknowledged, args.timeout)
            step(f"step 3: scope {scope}: replica {replica} shows acknowledged {acknowledged}")

        if args.screenshot:
            save_screenshot(driver, args.screenshot)
            step(f"step 4: screenshot saved to {args.screenshot}")
        else:
            step("step 4: no --screenshot given")

        if args.then_expect_file:
            then_expect(driver, args)
        else:
            step("step 5: no --then-expect-file given")

        check_console_and_origin(driver, args)
    except CheckFailed:
        if args.screenshot:
            root, ext = os.path.splitext(args.screenshot)
            try:
                save_screenshot(driver, root + ".failed" + (ext or ".png"))
                step(f"(the page at the failure: {root}.failed{ext or '.png'})")
            except Exception:  # noqa: BLE001
                pass
        raise
    finally:
        try:
            driver.quit()
        except Exception:  # noqa: BLE001
            pass


def main():
    args = arguments()
    try:
        check_credentials(args)
        run_browser(args)
    except CheckFailed as error:
        print(f"FAIL: {error}", flush=True)
        return 1
    except Exception as error:  # noqa: BLE001 - a Selenium or browser error is a failure too
        print(f"FAIL: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}", flush=True)
        return 1
    step("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
