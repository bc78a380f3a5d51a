// Python's format mini-language over kiln script values.
#include "cli/interp/format.h"

#include <cmath>
#include <cstdio>

#include "cli/interp/limits.h"
#include "cli/interp/numbers.h"

namespace kiln::interp {
namespace {

// Appends, or raises MemoryError past KILN_SCRIPT_MEMORY_LIMIT: '%s%s' % (s, s) doubles s.
void append_bounded(std::string& out, const std::string& piece) {
    check_memory((unsigned __int128)out.size() + piece.size(), "str formatting");
    out += piece;
}

struct Spec {
    char fill = ' ';
    char align = 0;  // '<', '>', '^', '=' or 0 for the type's default
    char sign = '-';
    bool alternate = false;
    int width = 0;
    char grouping = 0;  // ',' or '_'
    int precision = -1;
    char type = 0;
};

Spec parse_spec(Interp& in, const std::string& s) {
    Spec spec;
    size_t i = 0;
    auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
    if (s.size() >= 2 && is_align(s[1])) spec.fill = s[0], spec.align = s[1], i = 2;
    else if (!s.empty() && is_align(s[0])) spec.align = s[0], i = 1;
    if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec.sign = s[i++];
    if (i < s.size() && s[i] == '#') spec.alternate = true, ++i;
    if (i < s.size() && s[i] == '0') {
        if (!spec.align) spec.fill = '0', spec.align = '=';
        ++i;
    }
    while (i < s.size() && isdigit((unsigned char)s[i])) {
        spec.width = spec.width * 10 + (s[i++] - '0');
        if (spec.width > 10000) in.raise("ValueError", "format width too large");
    }
    if (i < s.size() && (s[i] == ',' || s[i] == '_')) spec.grouping = s[i++];
    if (i < s.size() && s[i] == '.') {
        ++i;
        if (i >= s.size() || !isdigit((unsigned char)s[i])) in.raise("ValueError", "Format specifier missing precision");
        spec.precision = 0;
        while (i < s.size() && isdigit((unsigned char)s[i])) {
            spec.precision = spec.precision * 10 + (s[i++] - '0');
            if (spec.precision > 1000) in.raise("ValueError", "format precision too large");
        }
    }
    if (i < s.size()) spec.type = s[i++];
    if (i != s.size()) in.raise("ValueError", "Invalid format specifier '" + s + "'");
    return spec;
}

std::string group(const std::string& digits, char sep) {
    if (!sep) return digits;
    std::string out;
    int n = int(digits.size());
    for (int i = 0; i < n; ++i) {
        if (i && (n - i) % 3 == 0) out += sep;
        out += digits[size_t(i)];
    }
    return out;
}

// Pads `body` (and its sign) to the width.
std::string pad(const Spec& spec, std::string sign, std::string body, char default_align) {
    char align = spec.align ? spec.align : default_align;
    int len = int(sign.size() + body.size());
    if (len >= spec.width) return sign + body;
    std::string fill(size_t(spec.width - len), spec.fill);
    switch (align) {
        case '<': return sign + body + fill;
        case '^': {
            size_t left = fill.size() / 2;
            return fill.substr(0, left) + sign + body + fill.substr(left);
        }
        case '=': return sign + fill + body;
        default: return fill + sign + body;
    }
}

std::string sign_of(const Spec& spec, bool negative) {
    if (negative) return "-";
    return spec.sign == '+' ? "+" : spec.sign == ' ' ? " " : "";
}

std::string format_float(Interp& in, double x, const Spec& spec) {
    char type = spec.type;
    std::string body;
    bool negative = std::signbit(x) && !std::isnan(x);
    double a = std::fabs(x);
    if (std::isnan(x) || std::isinf(x)) {
        body = std::isnan(x) ? "nan" : "inf";
        if (type == 'F' || type == 'E' || type == 'G') for (char& c : body) c = char(toupper(c));
        if (type == '%') body += "%";
        return pad(spec, sign_of(spec, negative), body, '>');
    }
    char buf[1100];
    if (type == 0 && spec.precision < 0) {
        body = repr_float(a);
    } else {
        int precision = spec.precision < 0 ? 6 : spec.precision;
        char t = type == 0 ? 'g' : type;
        if (t == '%') {
            std::snprintf(buf, sizeof buf, "%.*f", precision, a * 100);
            body = std::string(buf) + "%";
        } else if (t == 'f' || t == 'F' || t == 'e' || t == 'E' || t == 'g' || t == 'G') {
            char fmt[8] = {'%', '.', '*', t, 0};
            if (spec.alternate) fmt[0] = '%', fmt[1] = '#', fmt[2] = '.', fmt[3] = '*', fmt[4] = t, fmt[5] = 0;
            std::snprintf(buf, sizeof buf, fmt, precision, a);
            body = buf;
            // Python's general format without a type keeps a '.0' on integral values
            if (type == 0 && body.find_first_of(".e") == std::string::npos && body != "inf") body += ".0";
        } else {
            in.raise("ValueError", std::string("Unknown format code '") + type + "' for object of type 'float'");
        }
    }
    if (spec.grouping) {
        size_t end = body.find_first_not_of("0123456789");
        body = group(body.substr(0, end), spec.grouping) + (end == std::string::npos ? "" : body.substr(end));
    }
    return pad(spec, sign_of(spec, negative), body, '>');
}

std::string format_int(Interp& in, int64_t v, const Spec& spec) {
    char type = spec.type;
    if (type == 'e' || type == 'E' || type == 'f' || type == 'F' || type == 'g' || type == 'G' || type == '%')
        return format_float(in, double(v), spec);
    if (spec.precision >= 0) in.raise("ValueError", "Precision not allowed in integer format specifier");
    bool negative = v < 0;
    unsigned long long a = negative ? 0ull - (unsigned long long)v : (unsigned long long)v;
    std::string body;
    switch (type) {
        case 0: case 'd': case 'n': body = std::to_string(a); break;
        case 'x': case 'X': case 'o': case 'b': {
            int base = type == 'o' ? 8 : type == 'b' ? 2 : 16;
            const char* digits = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
            do body.insert(body.begin(), digits[a % unsigned(base)]), a /= unsigned(base);
            while (a);
            if (spec.alternate) body = std::string("0") + (type == 'o' ? "o" : type == 'b' ? "b" : type == 'X' ? "X" : "x") + body;
            break;
        }
        case 'c': body = std::string(1, char(a)); break;
        default: in.raise("ValueError", std::string("Unknown format code '") + type + "' for object of type 'int'");
    }
    if (spec.grouping && (type == 0 || type == 'd')) body = group(body, spec.grouping);
    return pad(spec, sign_of(spec, negative), body, '>');
}

}  // namespace

std::string format_value(Interp& in, const Value& v, const std::string& text) {
    if (auto t = v.as<Tensor>(); t && t->defined() && t->dim() == 0 && !text.empty()) {
        in.note_escape();  // formatting reads the value, as item() does
        if (t->dtype() == int64) return format_value(in, t->item<int64_t>(), text);
        if (t->dtype() == boolean) return format_value(in, bool(t->item<double>()), text);
        return format_value(in, t->item<double>(), text);
    }
    if (text.empty()) return str(v);
    Spec spec = parse_spec(in, text);
    if (auto b = v.as<bool>(); b && spec.type == 0) return pad(spec, "", *b ? "True" : "False", '<');
    if (auto i = as_int(v)) return format_int(in, *i, spec);
    if (auto d = v.as<double>()) return format_float(in, *d, spec);
    if (auto s = v.as<std::string>()) {
        if (spec.type && spec.type != 's') in.raise("ValueError", std::string("Unknown format code '") + spec.type + "' for object of type 'str'");
        if (spec.sign != '-') in.raise("ValueError", "Sign not allowed in string format specifier");
        std::string body = spec.precision >= 0 ? s->substr(0, size_t(spec.precision)) : *s;
        return pad(spec, "", body, '<');
    }
    in.raise("TypeError", "unsupported format string passed to " + type_name(v) + ".__format__");
}

std::string percent_format(Interp& in, const std::string& fmt, const Value& args) {
    std::vector<Value> items;
    if (auto t = args.as<std::shared_ptr<TupleObj>>()) items = (*t)->items;
    else items = {args};
    size_t next = 0;
    std::string out;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        if (++i >= fmt.size()) in.raise("ValueError", "incomplete format");
        if (fmt[i] == '%') {
            out += '%';
            continue;
        }
        // flags, width, precision, then the conversion: reuse the mini-language.
        std::string flags;
        while (i < fmt.size() && std::string("-+ 0#").find(fmt[i]) != std::string::npos) flags += fmt[i++];
        std::string width, precision;
        while (i < fmt.size() && isdigit((unsigned char)fmt[i])) width += fmt[i++];
        if (i < fmt.size() && fmt[i] == '.') {
            ++i;
            precision = ".";
            while (i < fmt.size() && isdigit((unsigned char)fmt[i])) precision += fmt[i++];
            if (precision == ".") precision = ".0";
        }
        if (i >= fmt.size()) in.raise("ValueError", "incomplete format");
        char conv = fmt[i];
        if (next >= items.size()) in.raise("TypeError", "not enough arguments for format string");
        const Value& v = items[next++];
        std::string spec;
        if (flags.find('-') != std::string::npos) spec += '<';
        else if (flags.find('0') != std::string::npos && conv != 's' && conv != 'r') spec += '=', spec.insert(0, "0");
        else spec += '>';
        if (flags.find('+') != std::string::npos) spec += '+';
        else if (flags.find(' ') != std::string::npos) spec += ' ';
        spec += width;
        switch (conv) {
            case 's': append_bounded(out, format_value(in, Value(str(v)), spec + precision)); break;
            case 'r': append_bounded(out, format_value(in, Value(repr(v)), spec + precision)); break;
            case 'd': case 'i': case 'u': {
                Value n = v;
                if (auto t = v.as<Tensor>(); t && t->defined() && t->numel() == 1) in.note_escape(), n = t->item<double>();
                if (auto d = n.as<double>()) n = float_to_int(std::trunc(*d));
                if (!as_int(n)) in.raise("TypeError", "%" + std::string(1, conv) + " format: a real number is required, not " + type_name(v));
                append_bounded(out, format_value(in, n, spec + "d"));
                break;
            }
            case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': case 'x': case 'X': case 'o': {
                Value n = v;
                if (auto t = v.as<Tensor>(); t && t->defined() && t->numel() == 1) in.note_escape(), n = t->item<double>();
                if (!n.is_number()) in.raise("TypeError", "must be real number, not " + type_name(v));
                if ((conv == 'x' || conv == 'X' || conv == 'o') && !as_int(n)) in.raise("TypeError", "%" + std::string(1, conv) + " format: an integer is required");
                append_bounded(out, format_value(in, n, spec + (precision.empty() && conv != 'x' && conv != 'X' && conv != 'o' ? ".6" : precision) + conv));
                break;
            }
            default: in.raise("ValueError", std::string("unsupported format character '") + conv + "'");
        }
    }
    if (next < items.size() && args.is<std::shared_ptr<TupleObj>>()) in.raise("TypeError", "not all arguments converted during string formatting");
    return out;
}

std::string str_format(Interp& in, const std::string& fmt, const CallArgs& args) {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        char c = fmt[i];
        if (c == '}') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
                out += '}', ++i;
                continue;
            }
            in.raise("ValueError", "Single '}' encountered in format string");
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
            out += '{', ++i;
            continue;
        }
        size_t close = fmt.find('}', i);
        if (close == std::string::npos) in.raise("ValueError", "Single '{' encountered in format string");
        std::string field = fmt.substr(i + 1, close - i - 1);
        i = close;
        std::string spec;
        char conversion = 0;
        if (size_t colon = field.find(':'); colon != std::string::npos) spec = field.substr(colon + 1), field = field.substr(0, colon);
        if (size_t bang = field.find('!'); bang != std::string::npos) {
            if (bang + 2 != field.size()) in.raise("ValueError", "expected ':' after conversion specifier");
            conversion = field[bang + 1];
            field = field.substr(0, bang);
        }
        Value v;
        if (field.empty()) {
            if (auto_index >= args.args.size()) in.raise("IndexError", "Replacement index " + std::to_string(auto_index) + " out of range for positional args tuple");
            v = args.args[auto_index++];
        } else if (isdigit((unsigned char)field[0])) {
            size_t k = std::stoul(field.substr(0, 6));
            if (k >= args.args.size()) in.raise("IndexError", "Replacement index " + std::to_string(k) + " out of range for positional args tuple");
            v = args.args[k];
        } else {
            std::string name = field.substr(0, field.find_first_of(".["));
            bool found = false;
            for (auto& [k, value] : args.kwargs)
                if (k == name) v = value, found = true;
            if (!found) in.raise("KeyError", "'" + name + "'");
            for (size_t at = name.size(); at < field.size() && field[at] == '.';) {  // {x.shape}
                size_t end = field.find_first_of(".[", at + 1);
                v = in.get_attr(v, field.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1));
                at = end == std::string::npos ? field.size() : end;
            }
        }
        if (conversion == 'r') v = repr(v);
        else if (conversion == 's') v = str(v);
        else if (conversion) in.raise("ValueError", std::string("Unknown conversion specifier ") + conversion);
        append_bounded(out, format_value(in, v, spec));
    }
    return out;
}

namespace {
struct FormatMethodObj : Object {
    std::string fmt;
    std::string type_name() const override { return "builtin_function_or_method"; }
    std::string repr() const override { return "<built-in method format of str object>"; }
    Value call(Interp& in, const ObjectPtr&, CallArgs& args) override { return str_format(in, fmt, args); }
};
}  // namespace

Value str_format_method(const std::string& fmt) {
    auto m = std::make_shared<FormatMethodObj>();
    m->fmt = fmt;
    return m;
}

}  // namespace kiln::interp
