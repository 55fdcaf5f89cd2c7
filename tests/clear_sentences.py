"""English and Chinese sentences, seeds and a synonym table that the tests
of CLEAR's text views share (tests/data/text_views_test.py,
text_view_specs_test.py)."""

ENGLISH = [
    "A man is playing a large flute .",
    "Three dogs run across the wet green grass near a small old house, barking loudly.",
    "The quick brown fox jumps over the lazy dog",
    "hello world",
]
CHINESE = [
    "一个男人在吹一支大笛子。",
    "我喜欢北京的秋天，天气很好，他说 Hello world 也喜欢。",
    "今天下午我们一起去公园散步，然后在湖边的咖啡馆喝咖啡。",
    "你好",
]
SENTENCES = ENGLISH + CHINESE
SEEDS = [0, 1, 7, 2024]
TABLE = {
    "man": ["guy", "fellow"],
    "large": ["big", "huge"],
    "dogs": ["hounds"],
    "grass": ["lawn", "turf"],
    "quick": ["fast", "rapid"],
    "lazy": ["idle"],
    "喜欢": ["喜爱", "爱"],
    "秋天": ["秋季"],
    "天气": ["气候"],
    "公园": ["花园", "园子"],
    "散步": ["走走"],
    "咖啡": ["咖啡饮料"],
    "男人": ["男子"],
}
