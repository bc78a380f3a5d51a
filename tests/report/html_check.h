// A small HTML reader for the report's tests: checks that tags balance (void elements,
// self-closing SVG tags, comments and <script>/<style> bodies understood), and lists the
// elements with their attributes so a test can look for links, data-node and line spans.
#pragma once
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace kiln_test {

struct HtmlElement {
    std::string tag;
    std::map<std::string, std::string> attrs;
    std::string text;  // the raw text up to the next tag (a <script>'s body for scripts)
};

struct HtmlScan {
    std::vector<HtmlElement> elements;
    std::string error;  // "" when every tag balanced
};

inline std::string html_unescape(std::string s) {
    const std::pair<const char*, const char*> entities[] = {
        {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}};
    for (auto [from, to] : entities)
        for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + 1))
            s.replace(at, std::string(from).size(), to);
    return s;
}

inline HtmlScan scan_html(const std::string& html) {
    static const std::set<std::string> kVoid = {"meta", "link", "br",  "hr",     "img", "input",
                                                "area", "base", "col", "source", "wbr"};
    HtmlScan out;
    std::vector<std::string> open;
    size_t i = 0;
    auto fail = [&](const std::string& why) {
        if (out.error.empty()) out.error = why + " (at byte " + std::to_string(i) + ")";
    };
    while (out.error.empty()) {
        size_t lt = html.find('<', i);
        if (lt == std::string::npos) break;
        if (!out.elements.empty()) out.elements.back().text += html.substr(i, lt - i);
        i = lt;
        if (html.compare(i, 4, "<!--") == 0) {
            size_t end = html.find("-->", i);
            if (end == std::string::npos) fail("unclosed comment");
            i = end + 3;
            continue;
        }
        if (html.compare(i, 2, "<!") == 0 || html.compare(i, 2, "<?") == 0) {
            i = html.find('>', i) + 1;
            continue;
        }
        size_t gt = html.find('>', i);
        if (gt == std::string::npos) {
            fail("unclosed tag");
            break;
        }
        std::string inner = html.substr(i + 1, gt - i - 1);
        i = gt + 1;
        if (!inner.empty() && inner[0] == '/') {
            std::string tag = inner.substr(1);
            if (open.empty()) {
                fail("</" + tag + "> closes nothing");
                break;
            }
            if (open.back() != tag) {
                fail("</" + tag + "> closes <" + open.back() + ">");
                break;
            }
            open.pop_back();
            continue;
        }
        bool self_closing = !inner.empty() && inner.back() == '/';
        if (self_closing) inner.pop_back();
        HtmlElement e;
        size_t k = 0;
        while (k < inner.size() && !std::isspace(static_cast<unsigned char>(inner[k]))) ++k;
        e.tag = inner.substr(0, k);
        while (k < inner.size()) {
            while (k < inner.size() && std::isspace(static_cast<unsigned char>(inner[k]))) ++k;
            size_t name_end = k;
            while (name_end < inner.size() && inner[name_end] != '=' &&
                   !std::isspace(static_cast<unsigned char>(inner[name_end])))
                ++name_end;
            std::string name = inner.substr(k, name_end - k);
            if (name.empty()) break;
            std::string value;
            k = name_end;
            if (k < inner.size() && inner[k] == '=') {
                char q = inner[k + 1];
                size_t end = inner.find(q, k + 2);
                if ((q != '"' && q != '\'') || end == std::string::npos) {
                    fail("unquoted attribute " + name + " in <" + e.tag + ">");
                    break;
                }
                value = html_unescape(inner.substr(k + 2, end - k - 2));
                k = end + 1;
            }
            e.attrs[name] = value;
        }
        out.elements.push_back(e);
        if (e.tag == "script" || e.tag == "style") {  // raw text up to the closing tag
            size_t end = html.find("</" + e.tag + ">", i);
            if (end == std::string::npos) {
                fail("unclosed <" + e.tag + ">");
                break;
            }
            out.elements.back().text = html.substr(i, end - i);
            i = end + e.tag.size() + 3;
            continue;
        }
        if (!self_closing && !kVoid.count(e.tag)) open.push_back(e.tag);
    }
    if (out.error.empty() && !open.empty()) out.error = "<" + open.back() + "> never closed";
    return out;
}

}  // namespace kiln_test
