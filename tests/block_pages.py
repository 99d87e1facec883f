"""Real-looking pages for the block classifier: what bot walls serve, and pages that only look
a little like them. Shapes follow the vendors' published pages; ids and tokens are made up."""

from __future__ import annotations

CSS = b"<style>" + b"body{margin:0;font:16px/1.5 system-ui,sans-serif}.main{max-width:60rem}" * 20
CSS += b"</style>"

CLOUDFLARE_CHALLENGE = (
    b'<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title>'
    b'<meta http-equiv="Content-Type" content="text/html; charset=UTF-8">'
    b'<meta name="robots" content="noindex,nofollow">'
    b'<meta name="viewport" content="width=device-width,initial-scale=1">' + CSS + b"</head>"
    b'<body class="no-js"><div class="main-wrapper" role="main"><div class="main-content">'
    b'<h1 class="zone-name-title h1">shop.example</h1>'
    b'<h2 class="h2" id="challenge-running">Verify you are human by completing the action below.'
    b'</h2><noscript><div id="challenge-error-title"><span id="challenge-error-text">Enable '
    b"JavaScript and cookies to continue</span></div></noscript>"
    b'<div id="challenge-body-text" class="core-msg spacer">shop.example needs to review the '
    b"security of your connection before proceeding.</div></div></div>"
    b"<script>(function(){window._cf_chl_opt={cvId: '3',cZone: \"shop.example\",cType: 'managed',"
    b"cRay: '8a1b2c3d4e5f6a7b',cH: 'mH3X.lPx',cUPMDTk: \"\\/?__cf_chl_tk=3n1fR0\"};"
    b"var cpo = document.createElement('script');"
    b"cpo.src = '/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1?ray=8a1b2c3d4e5f6a7b';"
    b"document.getElementsByTagName('head')[0].appendChild(cpo);}());</script>"
    b'<div class="footer" role="contentinfo"><div class="footer-inner"><div class="clearfix '
    b'diagnostic-wrapper"><div class="ray-id">Ray ID: <code>8a1b2c3d4e5f6a7b</code></div></div>'
    b'<div class="text-center" id="footer-text">Performance &amp; security by '
    b'<a rel="noopener noreferrer" href="https://www.cloudflare.com" target="_blank">'
    b"Cloudflare</a></div></div></div></body></html>"
)

CLOUDFLARE_1020 = (
    b'<!DOCTYPE html><html class="no-js" lang="en-US"><head>'
    b"<title>Access denied | shop.example used Cloudflare to restrict access</title>"
    + CSS
    + b'</head><body><div id="cf-wrapper"><div id="cf-error-details" class="p-0">'
    b'<header class="mx-auto pt-10 lg:pt-6 lg:px-8 w-240 lg:w-full mb-15 antialiased">'
    b'<h1 class="inline-block md:block mr-2 md:mb-2 font-light text-60 md:text-3xl '
    b'text-black-dark leading-tight"><span data-translate="error">Error</span>'
    b'<span class="cf-error-code">1020</span></h1><h2 class="text-gray-600 leading-1.3 '
    b'text-3xl font-light">Access denied</h2></header><section class="w-240 lg:w-full mx-auto '
    b'mb-8 lg:px-8"><div id="what-happened-section" class="w-1/2 md:w-full"><h2 class="text-3xl '
    b'leading-tight font-normal mb-4 text-black-dark antialiased">What happened?</h2>'
    b"<p>This website is using a security service to protect itself from online attacks.</p>"
    b"</div></section></div></div></body></html>"
)

DATADOME_CAPTCHA = (
    b"<html><head><title>shop.example</title><style>#cmsg{animation: A 1.5s;}@keyframes A{0%"
    b'{opacity:0;}99%{opacity:0;}100%{opacity:1;}}</style></head><body style="margin:0">'
    b'<p id="cmsg">Please enable JS and disable any ad blocker</p>'
    b"<script data-cfasync=\"false\">var dd={'rt':'c','cid':'AHrlqAAAAAMAr0gW2Vq9AQAAlsBGqA==',"
    b"'hsh':'2211F522B61E269B869FA6EAFFB5E1','t':'fe','s':17434,'e':'f1c3d0','host':"
    b"'geo.captcha-delivery.com'}</script>"
    b'<script data-cfasync="false" src="https://ct.captcha-delivery.com/c.js"></script>'
    b"</body></html>"
)

PERIMETERX_BLOCK = (
    b'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
    b'<meta name="viewport" content="width=device-width, initial-scale=1">'
    b"<title>Access to this page has been denied</title>" + CSS + b"<script>"
    b"window._pxAppId = 'PXu6b0qd2S';window._pxJsClientSrc = '/u6b0qd2S/init.js';"
    b"window._pxFirstPartyEnabled = true;window._pxHostUrl = '/u6b0qd2S/xhr';</script>"
    b'<script src="/u6b0qd2S/captcha/captcha.js?a=c&m=0&u=0f4b2c1e"></script></head><body>'
    b'<section class="container"><div class="page-title-wrapper"><div class="page-title">'
    b'<h1>Before we continue...</h1></div></div><div class="content-wrapper"><div class="content">'
    b"<p>Press &amp; Hold to confirm you are a human (and not a bot).</p>"
    b'<div id="px-captcha"></div><p>Reference ID 5f3c1a2b-8d7e-11ee-b9d1-0242ac120002</p>'
    b"</div></div></section></body></html>"
)

AKAMAI_DENIED = (
    b"<HTML><HEAD>\n<TITLE>Access Denied</TITLE>\n</HEAD><BODY>\n<H1>Access Denied</H1>\n \n"
    b"You don't have permission to access \"http&#58;&#47;&#47;www&#46;shop&#46;example&#47;"
    b'product&#47;123" on this server.<P>\nReference&#32;&#35;18&#46;2f4e1502&#46;1700000000'
    b"&#46;5a1b2c3\n<P>https&#58;&#47;&#47;errors&#46;edgesuite&#46;net&#47;18&#46;2f4e1502"
    b"&#46;1700000000&#46;5a1b2c3</P>\n</BODY>\n</HTML>\n"
)

INCAPSULA_BLOCK = (
    b'<html style="height:100%"><head><META NAME="ROBOTS" CONTENT="NOINDEX, NOFOLLOW">'
    b'<meta name="format-detection" content="telephone=no">'
    b'<meta name="viewport" content="initial-scale=1.0"></head>'
    b'<body style="margin:0px;height:100%"><iframe id="main-iframe" '
    b'src="/_Incapsula_Resource?CWUDNSAI=23&xinfo=10-12345678-0%200NNN&incident_id='
    b'123000123-12345678901234567&edet=12&cinfo=0e000000&rpinfo=0&mth=GET" frameborder=0 '
    b'width="100%" height="100%" marginheight="0px" marginwidth="0px">Request unsuccessful. '
    b"Incapsula incident ID: 123000123-12345678901234567</iframe></body></html>"
)

KASADA_SHELL = (
    b"<html><head><script>window.KPSDK={};KPSDK.now=typeof performance!=='undefined'&&"
    b"performance.now?performance.now.bind(performance):Date.now.bind(Date);"
    b'KPSDK.start=KPSDK.now();</script><script src="/149e9513-01fa-4fb0-aad4-566afd725d1b/'
    b'2d206a39-8ed7-437e-a3be-862e0f06eea3/ips.js?tkrm_alpekz_s1.3=0EOFte4"></script>'
    b"</head><body></body></html>"
)

SUCURI_BLOCK = (
    b'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
    b"<title>Sucuri WebSite Firewall - Access Denied</title>" + CSS + b"</head><body>"
    b'<div id="main-container"><h1>Access Denied - Sucuri Website Firewall</h1>'
    b"<p>If you are the site owner, please whitelist your IP or if you think this block is an "
    b'error please <a href="https://support.sucuri.net/support/?new">open a support ticket</a>'
    b'.</p><table><tr><td>Block ID:</td><td>BNP005</td></tr></table><p>Contact: <a href="'
    b'mailto:cloudproxy@sucuri.net">cloudproxy@sucuri.net</a></p></div></body></html>'
)

DISTIL_BLOCK = (
    b"<!DOCTYPE html><html><head><title>Pardon Our Interruption</title>" + CSS + b"</head>"
    b'<body><div class="container"><h1>Pardon Our Interruption...</h1><p>As you were '
    b"browsing, something about your browser made us think you were a bot.</p></div>"
    b"</body></html>"
)

RECAPTCHA_LOGIN_WALL = (
    b'<!doctype html><html><head><meta charset="utf-8"><title>Sign in - Example Forum</title>'
    b'<link rel="stylesheet" href="/static/app.css">'
    b'<script src="https://www.google.com/recaptcha/api.js" async defer></script></head><body>'
    b'<header><a href="/">Example Forum</a></header><main><h1>Sign in to continue</h1>'
    b"<p>Please sign in to view this page.</p>"
    b'<form method="post" action="/login"><label>Email <input name="email" type="email">'
    b'</label><label>Password <input name="password" type="password"></label>'
    b'<div class="g-recaptcha" data-sitekey="6LcAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"></div>'
    b'<button type="submit">Sign in</button></form><p><a href="/forgot">Forgot your password?'
    b'</a> &middot; <a href="/register">Create an account</a></p></main><footer>'
    b'<a href="/terms">Terms</a> <a href="/privacy">Privacy</a></footer></body></html>'
)

SPA_SHELL = (
    b'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop</title>'
    b'<script defer="defer" src="/static/js/main.4f2a1c.js"></script></head><body>'
    b"<noscript>You need to enable JavaScript to run this app.</noscript>"
    b'<div id="root"></div></body></html>'
)

NAV = b"".join(b'<li><a href="/category/%d">Category %d</a></li>' % (i, i) for i in range(40))
CHROME_HEAD = b'<!doctype html><html><head><meta charset="utf-8">' + CSS
CHROME_TOP = b'</head><body><header><nav><ul class="menu">' + NAV + b"</ul></nav></header>"
CHROME_END = b'<footer><p>&copy; Example Shop</p><a href="/about">About</a></footer></body></html>'

SOFT_404 = (
    CHROME_HEAD + b"<title>Page not found - Example Shop</title>" + CHROME_TOP + b"<main>"
    b"<h1>Sorry, we couldn't find that page</h1><p>It may have moved. Try the search.</p>"
    b"</main>" + CHROME_END
)
SOFT_404_BARE = (
    b"<html><head><title>Not found</title></head><body><h1>Sorry, we couldn't find that page"
    b'</h1><p><a href="/">Back to the shop</a></p></body></html>'
)

_ARTICLE_TEXT = (
    b"<p>A CAPTCHA is a challenge that tries to tell people from programs. Google's reCAPTCHA "
    b"shows the familiar 'I'm not a robot' checkbox, and hCaptcha asks you to pick the "
    b"pictures with buses. Sites show them when they see unusual traffic, asking visitors to "
    b"verify you are human before going on; accessibility researchers have long argued that "
    b"these puzzles lock out blind users and anyone on a slow connection.</p>"
)
ARTICLE_ABOUT_CAPTCHAS = (
    b'<!doctype html><html><head><meta charset="utf-8"><title>Why CAPTCHAs are getting harder'
    b'</title></head><body><article><h1>Why CAPTCHAs are getting harder</h1><p class="byline">'
    b'By <a href="/authors/kim">Kim Lee</a></p>' + _ARTICLE_TEXT * 8 + b"<p>Further reading: "
    b'<a href="https://en.wikipedia.org/wiki/CAPTCHA">CAPTCHA</a>.</p></article></body></html>'
)

_DESCRIPTION = (
    b"<p>Handmade in Porto from full-grain leather, the Alba boot has a cork footbed that "
    b"shapes itself to your foot, a Goodyear-welted sole that can be resoled for decades, and "
    b"a waxed cotton lining that keeps feet dry on wet cobbles.</p>"
)
REVIEW_FORM = (
    b'<section id="reviews"><h2>Write a review</h2><form action="/reviews" method="post">'
    b'<textarea name="text"></textarea><div class="g-recaptcha" data-sitekey="6LcBBBB"></div>'
    b'<script src="https://www.google.com/recaptcha/api.js"></script>'
    b"<button>Send</button></form></section><!-- captcha: g-recaptcha v2, access denied -->"
)
RICH_PRODUCT = (
    CHROME_HEAD
    + b"<title>Alba boot - Example Shop</title>"
    + CHROME_TOP
    + b'<main><article class="product"><h1>Alba boot</h1><p class="price">&euro;189.00</p>'
    + _DESCRIPTION * 10
    + b"</article>"
    + REVIEW_FORM
    + b"</main>"
    + CHROME_END
)
# The same product without the navigation: few links, plenty of visible text.
PLAIN_PRODUCT = (
    b'<!doctype html><html><head><title>Alba boot</title></head><body><article class="product">'
    b'<h1>Alba boot</h1><p class="price">&euro;189.00</p>'
    + _DESCRIPTION * 10
    + b"</article>"
    + REVIEW_FORM
    + b"</body></html>"
)


def shop_page(size: int = 45_000, head_bytes: int = 2_000) -> bytes:
    """A shop page of ``size`` bytes whose navigation starts after ``head_bytes`` of scripts."""
    head = b"<html><head>" + b"<script>var cfg = {a: 1, b: [2, 3]};</script>" * (head_bytes // 45)
    nav = b"".join(b'<li><a href="/c/%d">Category %d</a></li>' % (i, i) for i in range(60))
    filler = b"<p class='desc'>Comfortable shoes for every season and size.</p>"
    body = head + b"</head><body><ul>" + nav + b"</ul>" + filler * (size // 60)
    return body[:size]
