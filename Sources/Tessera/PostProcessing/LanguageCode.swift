/// Language tags as containers take them: a manifest's tag (BCP 47 as HLS's `LANGUAGE` and
/// DASH's `lang` give it: `en`, `en-US`, `deu`) as the three-letter ISO 639-2 code MP4 and
/// Matroska store (`eng`, `ger`), in its bibliographic form, the one Matroska asks for and MP4
/// takes too.
enum LanguageCode {
    /// The ISO 639-2 code for `tag`, or `nil` when it names no language Tessera knows (`und`,
    /// `zxx`, a private-use or malformed tag).
    static func iso639_2(_ tag: String) -> String? {
        let primary = tag.split(whereSeparator: { $0 == "-" || $0 == "_" }).first.map { $0.lowercased() } ?? ""
        guard primary.utf8.allSatisfy({ (0x61...0x7A).contains($0) }) else { return nil }
        switch primary.utf8.count {
        case 2:
            return fromISO639_1[primary]
        case 3:
            guard !["und", "mul", "mis", "zxx"].contains(primary), !("qaa"..."qtz").contains(primary) else { return nil }
            return bibliographic[primary] ?? primary
        default:
            return nil
        }
    }

    /// ISO 639-2/T codes whose bibliographic form differs.
    static let bibliographic: [String: String] = [
        "sqi": "alb", "hye": "arm", "eus": "baq", "bod": "tib", "mya": "bur", "ces": "cze", "zho": "chi", "cym": "wel",
        "deu": "ger", "nld": "dut", "fra": "fre", "kat": "geo", "ell": "gre", "isl": "ice", "mkd": "mac", "mri": "mao",
        "msa": "may", "fas": "per", "ron": "rum", "slk": "slo",
    ]

    /// Every ISO 639-1 code with its ISO 639-2/B code.
    static let fromISO639_1: [String: String] = [
        "aa": "aar", "ab": "abk", "ae": "ave", "af": "afr", "ak": "aka", "am": "amh", "an": "arg", "ar": "ara", "as": "asm",
        "av": "ava", "ay": "aym", "az": "aze", "ba": "bak", "be": "bel", "bg": "bul", "bh": "bih", "bi": "bis", "bm": "bam",
        "bn": "ben", "bo": "tib", "br": "bre", "bs": "bos", "ca": "cat", "ce": "che", "ch": "cha", "co": "cos", "cr": "cre",
        "cs": "cze", "cu": "chu", "cv": "chv", "cy": "wel", "da": "dan", "de": "ger", "dv": "div", "dz": "dzo", "ee": "ewe",
        "el": "gre", "en": "eng", "eo": "epo", "es": "spa", "et": "est", "eu": "baq", "fa": "per", "ff": "ful", "fi": "fin",
        "fj": "fij", "fo": "fao", "fr": "fre", "fy": "fry", "ga": "gle", "gd": "gla", "gl": "glg", "gn": "grn", "gu": "guj",
        "gv": "glv", "ha": "hau", "he": "heb", "hi": "hin", "ho": "hmo", "hr": "hrv", "ht": "hat", "hu": "hun", "hy": "arm",
        "hz": "her", "ia": "ina", "id": "ind", "ie": "ile", "ig": "ibo", "ii": "iii", "ik": "ipk", "io": "ido", "is": "ice",
        "it": "ita", "iu": "iku", "ja": "jpn", "jv": "jav", "ka": "geo", "kg": "kon", "ki": "kik", "kj": "kua", "kk": "kaz",
        "kl": "kal", "km": "khm", "kn": "kan", "ko": "kor", "kr": "kau", "ks": "kas", "ku": "kur", "kv": "kom", "kw": "cor",
        "ky": "kir", "la": "lat", "lb": "ltz", "lg": "lug", "li": "lim", "ln": "lin", "lo": "lao", "lt": "lit", "lu": "lub",
        "lv": "lav", "mg": "mlg", "mh": "mah", "mi": "mao", "mk": "mac", "ml": "mal", "mn": "mon", "mr": "mar", "ms": "may",
        "mt": "mlt", "my": "bur", "na": "nau", "nb": "nob", "nd": "nde", "ne": "nep", "ng": "ndo", "nl": "dut", "nn": "nno",
        "no": "nor", "nr": "nbl", "nv": "nav", "ny": "nya", "oc": "oci", "oj": "oji", "om": "orm", "or": "ori", "os": "oss",
        "pa": "pan", "pi": "pli", "pl": "pol", "ps": "pus", "pt": "por", "qu": "que", "rm": "roh", "rn": "run", "ro": "rum",
        "ru": "rus", "rw": "kin", "sa": "san", "sc": "srd", "sd": "snd", "se": "sme", "sg": "sag", "si": "sin", "sk": "slo",
        "sl": "slv", "sm": "smo", "sn": "sna", "so": "som", "sq": "alb", "sr": "srp", "ss": "ssw", "st": "sot", "su": "sun",
        "sv": "swe", "sw": "swa", "ta": "tam", "te": "tel", "tg": "tgk", "th": "tha", "ti": "tir", "tk": "tuk", "tl": "tgl",
        "tn": "tsn", "to": "ton", "tr": "tur", "ts": "tso", "tt": "tat", "tw": "twi", "ty": "tah", "ug": "uig", "uk": "ukr",
        "ur": "urd", "uz": "uzb", "ve": "ven", "vi": "vie", "vo": "vol", "wa": "wln", "wo": "wol", "xh": "xho", "yi": "yid",
        "yo": "yor", "za": "zha", "zh": "chi", "zu": "zul",
    ]
}
